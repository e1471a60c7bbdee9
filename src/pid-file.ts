// The running broker's process id, in the data folder (broker.pid), for `mcp-auth-broker reload`:
// written when a broker with a configuration file starts, removed when it stops. A file left by a
// broker that died names a process that is gone (or another program): the reader checks.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { Logger } from "./logger.ts";
import { firstLine } from "./lib/error-text.ts";

export const PID_FILE = "broker.pid";

export function writePidFile(dataDir: string, log: Logger): { remove(): void } {
  const file = path.join(dataDir, PID_FILE);
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    writeFileSync(file, `${process.pid}\n`, { mode: 0o600 });
  } catch (err) {
    log.warn({ file, err: firstLine(err) }, "could not write the pid file: `mcp-auth-broker reload` will not find this broker (send it SIGHUP yourself)");
    return { remove: () => undefined };
  }
  return {
    remove() {
      // Only our own: a broker started since may have written its pid.
      if (readPid(dataDir) === process.pid) rmSync(file, { force: true });
    },
  };
}

/** The pid a broker wrote in `dataDir`, or undefined when there is none (or it is not a pid). */
export function readPid(dataDir: string): number | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(dataDir, PID_FILE), "utf8").trim();
  } catch {
    return undefined;
  }
  const pid = Number(text);
  return Number.isSafeInteger(pid) && pid > 1 ? pid : undefined;
}

/** Whether the process `pid` runs a Node.js program (a broker), on systems with /proc; true elsewhere. */
export function isNodeProcess(pid: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
    return /(^|\/)node(js)?\0|mcp-auth-broker/.test(cmdline);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== "ENOENT";
  }
}
