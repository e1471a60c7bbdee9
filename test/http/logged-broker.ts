// A broker started in-process like test/support/start-broker.ts, whose log lines are kept in memory
// so that a test can say what was (and was not) logged, and at which level.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { loadConfig } from "../../src/config.ts";
import { createBroker, type Broker } from "../../src/broker.ts";
import { createLogger } from "../../src/logger.ts";
import { freePort } from "../support/start-broker.ts";

export interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

export interface LoggedBroker {
  readonly broker: Broker;
  readonly url: string;
  readonly logs: LogLine[];
  /** Resolves with the first line (already logged or still to come) that `match` accepts. */
  logged(match: (line: LogLine) => boolean): Promise<LogLine>;
  stop(): Promise<void>;
}

export const ERROR_LEVEL = 50;

export async function startLoggedBroker(env: Record<string, string> = {}): Promise<LoggedBroker> {
  const dir = mkdtempSync(path.join(tmpdir(), "mab-test-"));
  const port = await freePort();
  const config = loadConfig(
    {
      PORT: String(port),
      HOST: "127.0.0.1",
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      DATABASE_URL: `file:${path.join(dir, "broker.db")}`,
      SECRET_KEY: randomBytes(32).toString("base64"),
      LOG_LEVEL: "info",
      ...env,
    },
    dir,
  );
  const logs: LogLine[] = [];
  const waiters: Array<{ match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const text of chunk.toString("utf8").split("\n")) {
        if (!text) continue;
        const line = JSON.parse(text) as LogLine;
        logs.push(line);
        for (const w of [...waiters]) {
          if (w.match(line)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      }
      callback();
    },
  });
  const broker = await createBroker(config, { cwd: dir, logger: createLogger("info", destination) });
  await broker.listen();
  return {
    broker,
    url: config.publicUrl,
    logs,
    logged(match) {
      const seen = logs.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
    async stop() {
      await broker.stop(2000);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
