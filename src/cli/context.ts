// Opens what a CLI command needs: the same configuration, database and services as the server.
import { ConfigError, loadConfig, readEnvironment, type Config } from "../config.ts";
import pino from "pino";
import { createLogger } from "../logger.ts";
import { openDatabase, type Database } from "../store/db.ts";
import { createServices, type Services } from "../services.ts";
import { CliError } from "./output.ts";

export interface CliContext {
  readonly config: Config;
  readonly database: Database;
  readonly services: Services;
  close(): Promise<void>;
}

export function cliConfig(): Config {
  try {
    return loadConfig(readEnvironment(process.cwd()));
  } catch (err) {
    if (err instanceof ConfigError) throw new CliError(`configuration error: ${err.message}`);
    throw err;
  }
}

export async function openCliContext(): Promise<CliContext> {
  const config = cliConfig();
  const database = await openDatabase(config.databaseUrl);
  try {
    await database.db.client.count();
  } catch {
    await database.close();
    throw new CliError("the database is not ready (not migrated, or unreachable); run `npx mcp-auth-broker migrate` first and check DATABASE_URL");
  }
  // Logs go to stderr at warn so command output stays clean for scripts.
  const logger = createLogger(process.env.LOG_LEVEL === "debug" ? "debug" : "warn", pino.destination(2));
  const services = createServices(config, database, logger);
  return {
    config,
    database,
    services,
    async close() {
      await services.grants.usage.flush();
      await database.close();
    },
  };
}

export async function withContext<T>(run: (ctx: CliContext) => Promise<T>): Promise<T> {
  const ctx = await openCliContext();
  try {
    return await run(ctx);
  } finally {
    await ctx.close();
  }
}
