// The server as a process: configuration → migrations → broker → listen; graceful shutdown on
// signals. Start-up problems are one clear line and exit code 1, never a stack trace. `npm start`
// (main.ts) and `mcp-auth-broker serve` both run it.
import { ConfigError, loadConfig, readEnvironment, type Config } from "./config/load.ts";
import type { Env } from "./config/values.ts";
import { describeUnknownVariable, unknownVariables } from "./config/sources.ts";
import { logFormatFor } from "./logger.ts";
import type { Activity, Broker } from "./broker.ts";
import type { RunningServer } from "./http/server.ts";
import { MigrationError } from "./store/migration-error.ts";
import { installProcessGuard } from "./process-guard.ts";
import { writePidFile } from "./pid-file.ts";
import { firstLine } from "./lib/error-text.ts";
import { constants as osConstants } from "node:os";
import { describeListenFailure, listenFailure } from "./diagnostics/listen-probe.ts";
import { DEMO_TOOLS } from "./demo/tools.ts";

/** How long a shutdown waits for requests in flight before it ends streams and cuts connections. */
const SHUTDOWN_DEADLINE_MS = 10_000;

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

/**
 * The configuration file read again and its catalogue served (Broker.reload). A file with mistakes,
 * or a change that needs a restart, is refused with one error line (each mistake after it): the
 * servers stay as they were. Only the catalogue is reloaded; other settings need a restart.
 */
async function reloadFile(broker: Broker, io: ServeIo): Promise<void> {
  let next: Config;
  try {
    next = loadConfig(readEnvironment(io.cwd, io.env), io.cwd, { createDemoSecret: false });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    broker.logger.error({ err: err.message }, "reload refused: the configuration has mistakes; the MCP servers stay as they were");
    return;
  }
  try {
    await broker.reload(next.catalogue);
  } catch (err) {
    broker.logger.error({ err: firstLine(err) }, "reload refused; the MCP servers stay as they were");
  }
}

function startConfig(env: Env, io: ServeIo): Config {
  try {
    return loadConfig(env, io.cwd);
  } catch (err) {
    if (err instanceof ConfigError) fail(`configuration error: ${err.message}`);
    throw err;
  }
}

/** The broker assembled (migrations included); a database that cannot be used is said in one line. */
async function openBroker(config: Config, io: ServeIo): Promise<Broker> {
  try {
    // Loaded only once the configuration holds: a mistake in it is reported in a fraction of the
    // time the whole broker (Prisma, the SDK, every router) takes to load.
    const { createBroker } = await import("./broker.ts");
    return await createBroker(config, { cwd: io.cwd });
  } catch (err) {
    if (err instanceof ConfigError) fail(`configuration error: ${err.message}`);
    if (err instanceof MigrationError || config.databaseKind === "postgres") {
      const { describeDatabaseFailure } = await import("./store/database-failure.ts");
      fail(`cannot use the database (DATABASE_URL=${redactDbUrl(config.databaseUrl)}): ${await describeDatabaseFailure(config.databaseUrl, err)}`);
    }
    throw err;
  }
}

async function listenOrStop(broker: Broker, config: Config): Promise<RunningServer> {
  try {
    return await broker.listen();
  } catch (err) {
    // What the broker opened (database, writer thread, demo servers) must not outlive a start that
    // failed: `mcp-auth-broker serve` in a caller's process returns instead of exiting.
    await broker.stop(0).catch(() => undefined);
    const why = describeListenFailure((err as NodeJS.ErrnoException).code, config.host, config.port);
    if (why) fail(why);
    throw err;
  }
}

/** SIGTERM or SIGINT drains what is in flight; a second one stops at once. Resolves to the exit code. */
function stopOnSignals(broker: Broker): Promise<number> {
  return new Promise<number>((resolve) => {
    let stopping = false;
    const shutdown = (signal: NodeJS.Signals) => {
      if (stopping) {
        // The operator does not want to wait: stop now, with the shell's code for death by signal.
        broker.logger.warn({ signal }, `second ${signal}: stopping at once, without waiting for what is in flight`);
        resolve(128 + osConstants.signals[signal]);
        return;
      }
      stopping = true;
      const activity = broker.activity();
      broker.logger.info({ signal, ...activity, deadlineSeconds: SHUTDOWN_DEADLINE_MS / 1000 }, shutdownNotice(signal, activity));
      broker
        .stop(SHUTDOWN_DEADLINE_MS)
        .then(() => resolve(0))
        .catch((err: unknown) => {
          broker.logger.error({ err }, "error during shutdown");
          resolve(1);
        });
    };
    process.on("SIGTERM", () => shutdown("SIGTERM"));
    process.on("SIGINT", () => shutdown("SIGINT"));
  });
}

/**
 * logrotate moves the audit file away, then signals: later events go to a new file. Only then is
 * SIGHUP handled; otherwise it ends the process, as it ends any program whose terminal closed.
 * With a configuration file, SIGHUP (or `mcp-auth-broker reload`) also reads it again.
 */
function onHangup(broker: Broker, config: Config, io: ServeIo): void {
  const reloadsFile = config.catalogue.source.kind === "file";
  if (config.observability.auditSink?.kind === "file" || reloadsFile)
    process.on("SIGHUP", () => {
      if (config.observability.auditSink?.kind === "file") broker.reopenAuditSink();
      if (reloadsFile) void reloadFile(broker, io);
    });
}

/** What the operator should know at every start: plain http on a network, misspelt variables. */
function startWarnings(broker: Broker, config: Config, env: Env): void {
  if (config.insecurePublicUrl)
    broker.logger.warn(
      { publicUrl: config.publicUrl },
      `INSECURE_PUBLIC_URL=true: PUBLIC_URL ${config.publicUrl} is plain http on a network address: tokens, codes and cookies cross the network unencrypted; for anything but a test, put a TLS reverse proxy in front (README: "Behind a reverse proxy")`,
    );
  // A misspelt setting is ignored, which would silently change behaviour: say so at every start.
  for (const unknown of unknownVariables(env))
    broker.logger.warn({ variable: unknown.name, nearest: unknown.nearest }, `${describeUnknownVariable(unknown)}; it is ignored`);
}

function announce(broker: Broker, config: Config, port: number, io: ServeIo): void {
  const json = logFormatFor(config.logFormat) === "json";
  // For a log collector, the banner is one log line with its facts as fields.
  broker.logger.info(
    {
      url: config.publicUrl,
      port,
      database: config.databaseKind,
      upstream: config.upstream.provider,
      ...(json ? { mcpEndpoint: config.resourceUrl, health: `${config.publicUrl}/healthz`, demoMode: config.demoMode } : {}),
    },
    json ? `mcp-auth-broker is running (listening on ${config.host}:${port})${config.demoMode ? " in DEMO MODE" : ""}` : "mcp-auth-broker listening",
  );
  if (!json) io.out(startBanner(config, port));
}

async function start(io: ServeIo): Promise<number> {
  const env = readEnvironment(io.cwd, io.env);
  const config = startConfig(env, io);
  // Said before the migrations run: they can take seconds, and the start fails on the port anyway.
  const portProblem = await listenFailure(config.host, config.port);
  if (portProblem !== undefined)
    fail(describeListenFailure(portProblem, config.host, config.port) ?? `cannot listen on ${config.host}:${config.port} (${portProblem})`);
  const broker = await openBroker(config, io);
  const running = await listenOrStop(broker, config);
  // Stoppable before the banner says it is running: whoever waits for the banner may signal at once.
  const stopped = stopOnSignals(broker);
  onHangup(broker, config, io);
  const pidFile = config.catalogue.source.kind === "file" ? writePidFile(config.dataDir, broker.logger) : undefined;
  installProcessGuard(broker.logger);
  startWarnings(broker, config, env);
  announce(broker, config, running.port, io);
  return stopped.finally(() => pidFile?.remove());
}

/** The first line of a shutdown: what it waits for, until when, and how not to wait. */
function shutdownNotice(signal: NodeJS.Signals, activity: Activity): string {
  const again = signal === "SIGINT" ? "press Ctrl-C again" : `send ${signal} again`;
  const draining = activity.requests - activity.listening;
  const parts = [
    draining > 0
      ? `draining ${draining} request(s) in flight${activity.answering ? `, ${activity.answering} of them MCP stream(s) (a JSON-RPC error ends any still open at the deadline)` : ""}, for at most ${SHUTDOWN_DEADLINE_MS / 1000} s`
      : "nothing in flight",
    activity.listening ? `${activity.listening} MCP event stream(s) with no request pending end now` : "",
  ];
  return `shutting down (${signal}): ${parts.filter(Boolean).join("; ")}; ${again} to stop at once`;
}

/** The MCP Inspector's package asks for this Node version; the banner says so on an older one. */
const INSPECTOR_NODE = [22, 19] as const;

function inspectorNote(): string {
  const [major, minor] = process.versions.node.split(".").map(Number) as [number, number];
  const old = major < INSPECTOR_NODE[0] || (major === INSPECTOR_NODE[0] && minor < INSPECTOR_NODE[1]);
  return old ? ` (it needs Node.js ${INSPECTOR_NODE.join(".")} or newer; this is ${process.versions.node})` : "";
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
      `sign in with any user name (no password), in front of a demo MCP server (${DEMO_TOOLS.join(", ")}).`,
      `Try it with the MCP Inspector${inspectorNote()}:`,
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
