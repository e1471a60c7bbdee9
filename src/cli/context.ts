// Opens what a CLI command needs: the same configuration, database and services as the server.
// The database and services are imported when a command opens them, not when the CLI starts:
// `--help` and usage errors answer without loading Prisma and the whole broker.
import { ConfigError, loadConfig, readEnvironment, type Config } from "../config/load.ts";
import type { Services } from "../services.ts";
import { CliError } from "./output.ts";
import type { CliIo } from "./io.ts";

/** Commands act through the services, never on the database itself (storage stays in grants/ and store/). */
export interface CliContext {
  readonly config: Config;
  readonly services: Services;
  close(): Promise<void>;
}

export function cliConfig(io: CliIo): Config {
  try {
    return loadConfig(readEnvironment(io.cwd, io.env), io.cwd);
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`);
    throw err;
  }
}

export async function openCliContext(io: CliIo): Promise<CliContext> {
  const config = cliConfig(io);
  const [{ openDatabase }, { schemaIsReady }, { createServices }, { createLogger }] = await Promise.all([
    import("../store/db.ts"),
    import("../store/readiness.ts"),
    import("../services.ts"),
    import("../logger.ts"),
  ]);
  const database = await openDatabase(config.databaseUrl, io.cwd);
  if (!(await schemaIsReady(database))) {
    await database.close();
    throw new CliError("the database is not ready (not migrated, or unreachable); run `npx mcp-auth-broker migrate` first and check DATABASE_URL");
  }
  // Warnings go to stderr as one readable line each, so command output stays clean for scripts
  // and an operator reads sentences, not JSON log records.
  const logger = createLogger(io.env.LOG_LEVEL === "debug" ? "debug" : "warn", { write: (line: string) => io.err(readableLogLine(line)) });
  const services = createServices(config, database, logger);
  return {
    config,
    services,
    async close() {
      await services.grants.usage.flush();
      await database.close();
    },
  };
}

const LEVELS: Record<number, string> = { 20: "debug", 30: "info", 40: "warning", 50: "error", 60: "fatal" };

/** A pino JSON record as the CLI prints it: `mcp-auth-broker: warning: <message> (<error>)`. */
export function readableLogLine(line: string): string {
  try {
    const record = JSON.parse(line) as { level?: number; msg?: string; err?: string | { message?: string } };
    const error = typeof record.err === "string" ? record.err : record.err?.message;
    const reason = error ? ` (${error.split("\n")[0]})` : "";
    return `mcp-auth-broker: ${LEVELS[record.level ?? 40] ?? "log"}: ${record.msg ?? ""}${reason}\n`;
  } catch {
    return line;
  }
}

export async function withContext<T>(io: CliIo, run: (ctx: CliContext) => Promise<T>): Promise<T> {
  const ctx = await openCliContext(io);
  try {
    return await run(ctx);
  } finally {
    await ctx.close();
  }
}
