// A broker started in-process like test/support/start-broker.ts, whose log lines are kept in memory
// so that a test can say what was (and was not) logged, and at which level.
import type { Broker } from "../../src/broker.ts";
import { startBroker } from "../support/start-broker.ts";

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
  const logs: LogLine[] = [];
  const waiters: Array<{ match: (line: LogLine) => boolean; resolve: (line: LogLine) => void }> = [];
  const logDestination = {
    write(text: string) {
      for (const part of text.split("\n")) {
        if (!part) continue;
        const line = JSON.parse(part) as LogLine;
        logs.push(line);
        for (const w of [...waiters]) {
          if (w.match(line)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
      }
    },
  };
  const t = await startBroker({ LOG_LEVEL: "info", ...env }, { logDestination });
  return {
    broker: t.broker,
    url: t.url,
    logs,
    logged(match) {
      const seen = logs.find(match);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve) => waiters.push({ match, resolve }));
    },
    stop: () => t.stop(),
  };
}
