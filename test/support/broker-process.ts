// The real broker process (`npm start`'s command) on an ephemeral port, for tests that need what
// only a process shows: that it survives a fault, or what a kill -9 leaves behind.
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { freePort } from "./start-broker.ts";
import { startServer, waitForOutput } from "./spawn.ts";

export interface BrokerProcess {
  readonly child: ChildProcess;
  readonly url: string;
  /** Everything the process wrote to stderr and stdout so far (its log and banner). */
  output(): string;
  /** Resolves when the process has exited (with its exit code or signal). */
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGKILL, as a crash or `kill -9` would. */
  kill(): Promise<void>;
}

export async function startBrokerProcess(cwd: string, env: Record<string, string>, attempt = 1): Promise<BrokerProcess> {
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = startServer({
    cwd,
    env: { PORT: String(port), HOST: "127.0.0.1", PUBLIC_URL: url, SECRET_KEY: randomBytes(32).toString("base64"), LOG_LEVEL: "warn", ...env },
  });
  let output = "";
  child.stdout?.on("data", (d: Buffer) => (output += d.toString()));
  child.stderr?.on("data", (d: Buffer) => (output += d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  try {
    await waitForOutput(child, /mcp-auth-broker is running/, 30_000);
  } catch (err) {
    // The free port was taken before the broker listened (another test's): try another one.
    if (attempt < 5 && /already in use/.test(output)) return startBrokerProcess(cwd, env, attempt + 1);
    throw err;
  }
  return {
    child,
    url,
    output: () => output,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}
