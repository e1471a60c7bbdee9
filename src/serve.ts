// The server as a process: configuration → migrations → broker → listen; graceful shutdown on
// signals. Start-up problems are one clear line and exit code 1, never a stack trace. `npm start`
// (main.ts) and `mcp-auth-broker serve` both run it.
import { ConfigError, loadConfig, readEnvironment, type Config } from "./config.ts";
import type { Env } from "./config-values.ts";
import { describeUnknownVariable, unknownVariables } from "./config-sources.ts";
import { logFormatFor } from "./logger.ts";
import type { Broker } from "./broker.ts";
import type { RunningServer } from "./http/server.ts";
import { MigrationError } from "./store/migration-error.ts";
import { installProcessGuard } from "./process-guard.ts";

/** Where the server reads its configuration and prints its banner and start-up errors. */
export interface ServeIo {
  readonly cwd: string;
  readonly env: Env;
  out(text: string): void;
  err(text: string): void;
}

const processIo: ServeIo = {
  cwd: process.cwd(),
  env: process.env,
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};

class StartError extends Error {}

function fail(message: string): never {
  throw new StartError(message);
}

/**
 * Runs the server in this process until a signal stops it; resolves to the process's exit code
 * (1 after a start-up problem, already printed).
 */
export async function serve(io: ServeIo = processIo): Promise<number> {
  try {
    return await start(io);
  } catch (err) {
    const message = err instanceof StartError ? err.message : `failed to start: ${(err instanceof Error ? err.message : String(err)).split("\n")[0]}`;
    io.err(`mcp-auth-broker: ${message}\n`);
    return 1;
  }
}

async function start(io: ServeIo): Promise<number> {
  let config: Config;
  const env = readEnvironment(io.cwd, io.env);
  try {
    config = loadConfig(env, io.cwd);
  } catch (err) {
    if (err instanceof ConfigError) fail(`configuration error: ${err.message}`);
    throw err;
  }
  let broker: Broker;
  try {
    // Loaded only once the configuration holds: a mistake in it is reported in a fraction of the
    // time the whole broker (Prisma, the SDK, every router) takes to load.
    const { createBroker } = await import("./broker.ts");
    broker = await createBroker(config, { cwd: io.cwd });
  } catch (err) {
    if (err instanceof ConfigError) fail(`configuration error: ${err.message}`);
    if (err instanceof MigrationError || config.databaseKind === "postgres") {
      const { describeDatabaseFailure } = await import("./store/database-failure.ts");
      fail(`cannot use the database (DATABASE_URL=${redactDbUrl(config.databaseUrl)}): ${await describeDatabaseFailure(config.databaseUrl, err)}`);
    }
    throw err;
  }
  let running: RunningServer;
  try {
    running = await broker.listen();
  } catch (err) {
    // What the broker opened (database, writer thread, demo servers) must not outlive a start that
    // failed: `mcp-auth-broker serve` in a caller's process returns instead of exiting.
    await broker.stop(0).catch(() => undefined);
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE") fail(`port ${config.port} on ${config.host} is already in use; set PORT to a free port`);
    if (code === "EACCES") fail(`not allowed to listen on ${config.host}:${config.port}; choose a PORT above 1024`);
    if (code === "EADDRNOTAVAIL") fail(`HOST=${config.host} is not an address of this machine`);
    throw err;
  }
  // Stoppable before the banner says it is running: whoever waits for the banner may signal at once.
  const stopped = new Promise<number>((resolve) => {
    let stopping = false;
    const shutdown = (signal: string) => {
      if (stopping) return;
      stopping = true;
      broker.logger.info({ signal }, "shutting down: finishing in-flight requests");
      broker
        .stop(10_000)
        .then(() => resolve(0))
        .catch((err: unknown) => {
          broker.logger.error({ err }, "error during shutdown");
          resolve(1);
        });
    };
    process.on("SIGTERM", () => shutdown("SIGTERM"));
    process.on("SIGINT", () => shutdown("SIGINT"));
  });
  // logrotate moves the audit file away, then signals: later events go to a new file. Only then is
  // SIGHUP handled; otherwise it ends the process, as it ends any program whose terminal closed.
  if (config.observability.auditSink?.kind === "file") process.on("SIGHUP", () => broker.reopenAuditSink());
  installProcessGuard(broker.logger);
  // A misspelt setting is ignored, which would silently change behaviour: say so at every start.
  for (const unknown of unknownVariables(env))
    broker.logger.warn({ variable: unknown.name, nearest: unknown.nearest }, `${describeUnknownVariable(unknown)}; it is ignored`);
  const json = logFormatFor(config.logFormat) === "json";
  // For a log collector, the banner is one log line with its facts as fields.
  broker.logger.info(
    {
      url: config.publicUrl,
      port: running.port,
      database: config.databaseKind,
      upstream: config.upstream.provider,
      ...(json ? { mcpEndpoint: config.resourceUrl, health: `${config.publicUrl}/healthz`, demoMode: config.demoMode } : {}),
    },
    json ? `mcp-auth-broker is running (listening on ${config.host}:${running.port})${config.demoMode ? " in DEMO MODE" : ""}` : "mcp-auth-broker listening",
  );
  if (!json) io.out(startBanner(config, running.port));
  return stopped;
}

function startBanner(config: Config, port: number): string {
  const lines = [
    "",
    `mcp-auth-broker is running (listening on ${config.host}:${port}).`,
    `  MCP endpoint: ${config.resourceUrl}      <- paste this URL into your MCP client`,
    `  Health:       ${config.publicUrl}/healthz`,
  ];
  if (config.demoMode) {
    lines.push(
      "",
      "DEMO MODE: no upstream identity provider is configured, so the built-in demo IdP lets anyone",
      "sign in with any user name (no password), in front of a demo MCP server (whoami, echo, countdown).",
      "Try it with the MCP Inspector:",
      "  npx @modelcontextprotocol/inspector",
      `  then choose transport "Streamable HTTP", URL ${config.resourceUrl}, and Connect.`,
      "For a real login, set UPSTREAM_PROVIDER and its credentials in .env (see README.md).",
    );
  }
  return `${lines.join("\n")}\n\n`;
}

function redactDbUrl(url: string): string {
  return url.replace(/\/\/([^:@/]+):([^@/]+)@/, "//$1:***@");
}
