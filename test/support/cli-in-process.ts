// The operator CLI in-process (the same program as the binary) with its output captured: for tests
// that read what it prints without paying for a process. spawn.ts runs the real binary.
import { runCli } from "../../src/cli/program.ts";
import { cleanEnv } from "./spawn.ts";
import type { TestBroker } from "./start-broker.ts";

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the CLI on `args` in `cwd` with `env`, none of this test process's own broker variables. */
export async function runCliCaptured(args: readonly string[], options: { readonly cwd: string; readonly env: Record<string, string> }): Promise<CliResult> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, {
    cwd: options.cwd,
    env: cleanEnv(options.env),
    out: (s) => {
      stdout += s;
    },
    err: (s) => {
      stderr += s;
    },
  });
  return { code, stdout, stderr };
}

/** What the CLI needs to work on `b`'s database, as an operator's .env beside it says. */
export function brokerCliEnv(b: TestBroker): Record<string, string> {
  return { DATABASE_URL: b.broker.config.databaseUrl, SECRET_KEY: b.broker.config.secretKey.toString("base64"), PUBLIC_URL: b.url };
}
