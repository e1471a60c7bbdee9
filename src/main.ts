// Process entry: configuration → migrations → broker → listen; graceful shutdown on signals.
// Start-up problems are one clear line and exit code 1, never a stack trace.
import { ConfigError, loadConfig, readEnvironment, type Config } from "./config.ts";
import { createBroker, type Broker } from "./broker.ts";
import type { RunningServer } from "./http/server.ts";
import { MigrationError } from "./store/migrate.ts";
import { installProcessGuard } from "./process-guard.ts";

function fail(message: string): never {
  process.stderr.write(`mcp-auth-broker: ${message}\n`);
  process.exit(1);
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig(readEnvironment(process.cwd()));
  } catch (err) {
    if (err instanceof ConfigError) fail(`configuration error: ${err.message}`);
    throw err;
  }
  let broker: Broker;
  try {
    broker = await createBroker(config);
  } catch (err) {
    if (err instanceof MigrationError) fail(`${err.message} (DATABASE_URL=${redactDbUrl(config.databaseUrl)})`);
    throw err;
  }
  let running: RunningServer;
  try {
    running = await broker.listen();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "EADDRINUSE") fail(`port ${config.port} on ${config.host} is already in use; set PORT to a free port`);
    if (code === "EACCES") fail(`not allowed to listen on ${config.host}:${config.port}; choose a PORT above 1024`);
    if (code === "EADDRNOTAVAIL") fail(`HOST=${config.host} is not an address of this machine`);
    throw err;
  }
  installProcessGuard(broker.logger);
  broker.logger.info(
    { url: config.publicUrl, port: running.port, database: config.databaseKind, upstream: config.upstream.provider },
    "mcp-auth-broker listening",
  );
  process.stdout.write(startBanner(config, running.port));

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    broker.logger.info({ signal }, "shutting down: finishing in-flight requests");
    broker
      .stop(10_000)
      .then(() => process.exit(0))
      .catch((err: unknown) => {
        broker.logger.error({ err }, "error during shutdown");
        process.exit(1);
      });
  };
  process.on("SIGTERM", () => shutdown("SIGTERM"));
  process.on("SIGINT", () => shutdown("SIGINT"));
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

main().catch((err: unknown) => {
  const message = err instanceof Error ? err.message : String(err);
  fail(`failed to start: ${message.split("\n")[0]}`);
});
