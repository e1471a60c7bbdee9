// Assembles a broker from its configuration: database, domain services, routers, HTTP server.
// main.ts runs one; tests start as many as they need on ephemeral ports.
import type Koa from "koa";
import type { Config } from "./config.ts";
import { createLogger, type Logger } from "./logger.ts";
import { openDatabase, type Database } from "./store/db.ts";
import { migrateDatabase } from "./store/migrate.ts";
import { createApp } from "./app.ts";
import { healthRouter } from "./http/health.ts";
import { listen, type RunningServer } from "./http/server.ts";

export interface BrokerOptions {
  readonly logger?: Logger;
  /** Apply pending migrations before opening the database (npm start does; some tests share one). */
  readonly migrate?: boolean;
  readonly cwd?: string;
}

export interface Broker {
  readonly config: Config;
  readonly logger: Logger;
  readonly database: Database;
  readonly app: Koa;
  /** Starts listening on config.host:config.port (0 = ephemeral). */
  listen(): Promise<RunningServer>;
  /** Graceful stop: the server (if listening) drains within the deadline, then the database closes. */
  stop(deadlineMs?: number): Promise<void>;
}

export async function createBroker(config: Config, options: BrokerOptions = {}): Promise<Broker> {
  const logger = options.logger ?? createLogger(config.logLevel);
  if (options.migrate ?? true) {
    const { applied } = await migrateDatabase(config.databaseUrl, options.cwd);
    if (applied.length > 0) logger.info({ applied }, "database migrations applied");
  }
  const database = await openDatabase(config.databaseUrl, options.cwd);
  const app = createApp({ config, logger, routers: [healthRouter(database)] });

  let running: RunningServer | undefined;
  return {
    config,
    logger,
    database,
    app,
    async listen() {
      running = await listen(app.callback(), config.port, config.host);
      return running;
    },
    async stop(deadlineMs = 10_000) {
      if (running) {
        const { forced } = await running.close(deadlineMs);
        if (forced) logger.warn({ deadlineMs }, "shutdown deadline reached; open connections were cut");
      }
      await database.close();
    },
  };
}
