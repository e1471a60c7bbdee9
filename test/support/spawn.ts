// Runs the real broker process (`npm start`'s command) or CLI for tests: the compiled dist/, which
// the suite's global setup builds when src/ is newer.
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** For scripts that import the TypeScript sources directly. */
export const tsxBin = path.join(projectRoot, "node_modules/.bin/tsx");
/** The operator CLI binary (package.json's bin). */
export const cliBin = path.join(projectRoot, "bin/mcp-auth-broker.js");

/** The script `npm start` runs with node: read from package.json, so the tests run what users do. */
export const serverEntry = ((): string => {
  const start = (JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as { scripts: { start: string } }).scripts.start;
  const entry = /^node (\S+)$/.exec(start)?.[1];
  if (!entry) throw new Error(`package.json's start script is not "node <file>": ${start}`);
  return path.join(projectRoot, entry);
})();

export interface Finished {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Env for child processes: the parent's PATH etc., none of the broker's own variables. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (
      /^(PORT|HOST|PUBLIC_URL|DATABASE_URL|BROKER_CONFIG|MCP_SERVER_|MCP_STDIO_|UPSTREAM_|GITHUB_|SECRET_KEY|ACCESS_TOKEN|REFRESH_|SESSION_|DYNAMIC_|FORWARD_|LOG_LEVEL|LOG_FORMAT|DEMO_|TRUST_PROXY|PROXY_|METRICS_|AUDIT_|ALLOW|CIMD|SCOPE|OTEL_)/.test(
        k,
      )
    )
      continue;
    if (k === "NODE_OPTIONS") continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

/**
 * `npm start`'s process in `cwd`, with only `env` of the broker's variables. Its output is a pipe,
 * where the broker logs JSON; the tests read what a person at a terminal sees (LOG_FORMAT=pretty)
 * unless `env` says otherwise.
 */
export function startServer(options: { cwd: string; env: Record<string, string> }): ChildProcess {
  return spawn(process.execPath, [serverEntry], {
    cwd: options.cwd,
    env: cleanEnv({ LOG_FORMAT: "pretty", ...options.env }),
    stdio: ["ignore", "pipe", "pipe"],
  });
}

/** The operator CLI binary as a process, run to its end: for what only a process shows (exit code, streams). */
export function runCliBinary(args: readonly string[], options: { cwd: string; env: Record<string, string> }): Promise<Finished> {
  return runToEnd(spawn(process.execPath, [cliBin, ...args], { cwd: options.cwd, env: cleanEnv(options.env), stdio: ["ignore", "pipe", "pipe"] }));
}

export function runToEnd(child: ChildProcess, timeoutMs = 20_000): Promise<Finished> {
  return new Promise((resolve, reject) => {
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`process did not finish in ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Waits until the child prints a line matching `pattern` on stdout. */
export function waitForOutput(child: ChildProcess, pattern: RegExp, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let seen = "";
    const onData = (d: Buffer) => {
      seen += d.toString();
      if (pattern.test(seen)) {
        clearTimeout(timer);
        child.stdout?.off("data", onData);
        resolve(seen);
      }
    };
    const timer = setTimeout(() => reject(new Error(`no output matching ${pattern} within ${timeoutMs} ms; got: ${seen}`)), timeoutMs);
    child.stdout?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`process exited with ${code} before printing ${pattern}; got: ${seen}`));
    });
  });
}
