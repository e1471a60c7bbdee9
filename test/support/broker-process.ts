// The real broker process (`npm start`'s command) on an ephemeral port, for tests that need what
// only a process shows: that it survives a fault, or what a kill -9 leaves behind.
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { freePort } from "./start-broker.ts";
import { startServer, waitForOutput } from "./spawn.ts";
import { copyMigratedSqlite } from "./template-db.ts";

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

/**
 * The process's database: DATABASE_URL, or broker.db in its folder. A SQLite file not there yet
 * starts as a copy of the migrated template, so the process finds nothing to migrate and starts
 * without the migration engine (over a second; the tests that are about migrating start their
 * own processes).
 */
export async function preparedDatabaseUrl(cwd: string, env: Record<string, string> = {}): Promise<string> {
  const url = env.DATABASE_URL ?? `file:${path.join(cwd, "broker.db")}`;
  const file = /^file:(.+)$/i.exec(url)?.[1];
  if (file !== undefined) {
    const absolute = path.resolve(cwd, file);
    if (!existsSync(absolute)) {
      mkdirSync(path.dirname(absolute), { recursive: true });
      await copyMigratedSqlite(absolute);
    }
  }
  return url;
}

export async function startBrokerProcess(cwd: string, env: Record<string, string>, attempt = 1): Promise<BrokerProcess> {
  const databaseUrl = await preparedDatabaseUrl(cwd, env);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const child = startServer({
    cwd,
    env: {
      PORT: String(port),
      HOST: "127.0.0.1",
      PUBLIC_URL: url,
      SECRET_KEY: randomBytes(32).toString("base64"),
      LOG_LEVEL: "warn",
      ...env,
      DATABASE_URL: databaseUrl,
    },
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
