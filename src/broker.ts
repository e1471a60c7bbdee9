// Assembles a broker from its configuration: database, domain services, the demo parts when no
// upstream or MCP server is configured, routers, HTTP server, periodic sweep.
// main.ts runs one; tests start as many as they need on ephemeral ports.
import Koa from "koa";
import type { RequestListener } from "node:http";
import { missingMcpServer, type Config } from "./config/load.ts";
import { createLogger, logFormatFor, prettyDestination, type Logger } from "./logger.ts";
import { openDatabase, type Database } from "./store/db.ts";
import { migrateDatabase } from "./store/migrate.ts";
import { createApp } from "./app.ts";
import { healthRouter } from "./http/health.ts";
import { BrokerMetrics, metricsRouter } from "./http/metrics.ts";
import { listen, type RunningServer } from "./http/server.ts";
import { createServices, type Services } from "./services.ts";
import { authorizationServerRoutes } from "./oauth/router.ts";
import type { ExactRoute } from "./http/exact-routes.ts";
import { callbackRouter } from "./oauth/callback.ts";
import { connectCallbackRouter } from "./oauth/connect-callback.ts";
import { frontDoorRouter } from "./account/front-door.ts";
import { accountRouter, type AccountDeps } from "./account/router.ts";
import { accountSignInCallback } from "./account/sign-in-callback.ts";
import { OpenStreams } from "./gateway/open-streams.ts";
import { allowedOrigin } from "./gateway/origin-check.ts";
import type { SessionRegistry } from "./stdio/session-registry.ts";
import type { McpHandler } from "./gateway/router.ts";
import { frontServers, refront, ServedCatalogue, type CatalogueChange, type FrontedServer, type FrontingDeps } from "./mcp-servers.ts";
import { LiveCatalogue, type Catalogue } from "./config/catalogue.ts";
import { narrowingRules } from "./grants/server-access.ts";
import type Router from "@koa/router";
import { systemClock, type Clock } from "./lib/clock.ts";
import { cachedSessionBinding } from "./gateway/database-session-binding.ts";
import { createMcpSessionStore } from "./store/mcp-sessions.ts";
import type { MountedDemoIdentityProvider } from "./demo/mount.ts";
import { publicPaths } from "./http/public-paths.ts";
import { createGuardedFetcher, type GuardedFetchOptions } from "./outbound/guarded-fetch.ts";
import { firstLine } from "./lib/error-text.ts";
import { runStartProbes } from "./diagnostics/start-probes.ts";
import type { Finding } from "./diagnostics/finding.ts";
import { packageVersion } from "./package-version.ts";
import type { Tracing } from "./telemetry/tracing.ts";
import { tracedHotStore } from "./store/hot-store-traced.ts";
import { createAuditSink, type AuditSink, type AuditSinkOptions } from "./audit-sink/sink.ts";
import { auditOutbox } from "./grants/audit-outbox.ts";
import { audit } from "./grants/audit.ts";

export interface BrokerOptions {
  readonly logger?: Logger;
  /** Apply pending migrations before opening the database (npm start does; some tests share one). */
  readonly migrate?: boolean;
  readonly cwd?: string;
  /** Period of the sweep of expired rows; 0 disables it (default 10 minutes). */
  readonly sweepIntervalMs?: number;
  /**
   * How often revocations made by other processes (CLI, other instances) are picked up (default
   * 500 ms: a revocation then reaches every instance within a second, poll and load included).
   */
  readonly revocationPollMs?: number;
  /**
   * Serve /mcp in-process with this handler (called after bearer authentication) instead of
   * proxying to MCP_SERVER_URL: the library use of the broker.
   */
  readonly mcpHandler?: McpHandler;
  /** The time the grants decide by (default: the system clock); tests move a ManualClock. */
  readonly clock?: Clock;
  /**
   * How Client ID Metadata Documents are fetched, beyond CIMD_ALLOW_PRIVATE_NETWORKS: tests give
   * their own DNS answers and the CA of their https document server.
   */
  readonly documentFetch?: Partial<Pick<GuardedFetchOptions, "lookup" | "ca" | "timeoutMs" | "maxBytes">>;
  /**
   * Outside demo mode, probe the identity provider and the MCP server at start and log what is
   * wrong (default true). Tests that count an emulator's calls turn it off.
   */
  readonly startProbes?: boolean;
  /** The audit sink's timing and stdout (AUDIT_SINK): tests poll and retry in milliseconds. */
  readonly auditSink?: Omit<AuditSinkOptions, "logger">;
}

/** Requests in flight, and of them the MCP event streams relayed: answering requests, or only listening (GET). */
export interface Activity {
  readonly requests: number;
  readonly answering: number;
  readonly listening: number;
}

export interface Broker {
  readonly config: Config;
  readonly logger: Logger;
  readonly database: Database;
  readonly services: Services;
  readonly app: Koa;
  /** The demo MCP server's URL when the broker fronts its own demo server. */
  readonly demoMcpUrl: string | undefined;
  /** The stdio MCP sessions and their children, when the broker fronts MCP_SERVER_COMMAND. */
  readonly stdioSessions: SessionRegistry | undefined;
  /** What the start-up probes found (undefined in demo mode or when they are off). */
  readonly startProbes: Promise<Finding[]> | undefined;
  /** Starts listening on config.host:config.port (0 = ephemeral), and on METRICS_PORT when set. */
  listen(): Promise<RunningServer>;
  /** Where /metrics listens on its own (METRICS_PORT), once listening. */
  metricsPort(): number | undefined;
  /** What a stop would wait for now. */
  activity(): Activity;
  /**
   * Graceful stop: the server (if listening) drains within the deadline, then everything closes.
   * MCP event streams that answer no request end at once; the others end just before the
   * deadline, with a JSON-RPC error for each request still unanswered.
   */
  stop(deadlineMs?: number): Promise<void>;
  /** The audit sink's file is opened again before its next batch (SIGHUP, after logrotate). */
  reopenAuditSink(): void;
  /**
   * Serves `next` instead of the catalogue it serves (SIGHUP, `mcp-auth-broker reload`): unchanged
   * servers keep running, removed ones stop and their grants end, validations are decided again
   * under the new rules at each token's next use. Throws ReloadRefused when it needs a restart.
   */
  reload(next: Catalogue): Promise<CatalogueChange>;
}

const TEN_MINUTES = 10 * 60 * 1000;
/** How long before the shutdown deadline open MCP streams are ended, so that their last event is flushed before connections are cut. */
const STREAM_END_MARGIN_MS = 500;
/**
 * At 1 s, a revocation committed just after a poll waited a whole period plus the next poll's
 * queries: more than the second the README promises. Half a second bounds it near 0.5 s (two
 * indexed queries per poll; test/account/instances.test.ts measures it).
 */
const REVOCATION_POLL_MS = 500;

/**
 * oidc-provider (the demo IdP) is loaded only in demo mode. On import it warns that it prefers
 * Node 22; the project supports Node 20.18+ and its tests run the demo IdP on it, so that one
 * notice goes to the debug log instead of alarming every newcomer's first start.
 */
/** The separate metrics listener's application: /metrics and nothing else. */
function metricsApp(metrics: BrokerMetrics, token: string | undefined): RequestListener {
  const app = new Koa();
  app.silent = true;
  const router = metricsRouter(metrics, token);
  app.use(router.routes());
  return app.callback();
}

/**
 * Grants standing on upstream tokens that no configured key can read (SECRET_KEY changed without
 * SECRET_KEY_PREVIOUS) end at start, with one line saying how many: their users sign in again, as
 * the README promises, instead of each request failing. A database that cannot answer now does not
 * stop the start: each such grant then ends at its next use.
 */
async function endUnreadableGrants(services: Services, logger: Logger): Promise<void> {
  try {
    const ended = await services.grants.sessions.endUnreadable();
    if (ended.sessions === 0) return;
    logger.warn(
      { grants: ended.grants, upstreamSessions: ended.sessions, keyIds: ended.keyIds },
      `${ended.grants} grant(s) ended: their upstream sign-ins were encrypted under a key that is neither SECRET_KEY nor in SECRET_KEY_PREVIOUS; their users must sign in again (keep the old key in SECRET_KEY_PREVIOUS when rotating)`,
    );
  } catch (err) {
    logger.warn({ err: firstLine(err) }, "could not look for grants encrypted under another SECRET_KEY at start; each ends at its next use");
  }
}

async function loadDemoMount(logger: Logger): Promise<typeof import("./demo/mount.ts")> {
  const warn = console.warn;
  console.warn = (...args: unknown[]) => {
    if (typeof args[0] === "string" && args[0].includes("oidc-provider WARNING: Unsupported runtime"))
      logger.debug({ notice: args[0] }, "demo identity provider");
    else warn(...args);
  };
  try {
    return await import("./demo/mount.ts");
  } finally {
    console.warn = warn;
  }
}

/** Migrations applied, tracing started when configured, the database opened (with traced statements when tracing). */
async function openStorage(config: Config, options: BrokerOptions, logger: Logger): Promise<{ database: Database; tracing: Tracing | undefined }> {
  if (options.migrate ?? true) {
    const { applied } = await migrateDatabase(config.databaseUrl, options.cwd);
    if (applied.length > 0) logger.info({ applied }, "database migrations applied");
  }
  // Loaded only when configured: a broker without tracing loads no part of the OpenTelemetry SDK.
  const { tracing: tracingConfig } = config.observability;
  const tracing: Tracing | undefined = tracingConfig ? (await import("./telemetry/tracing.ts")).startTracing(tracingConfig, logger) : undefined;
  // A broker that fails to start leaves no tracing behind in the process (a caller may try again).
  const opened = await openDatabase(config.databaseUrl, options.cwd).catch(async (err: unknown) => {
    await tracing?.shutdown();
    throw err;
  });
  return { database: tracing ? { ...opened, hot: tracedHotStore(opened.hot) } : opened, tracing };
}

/**
 * Every public route: health, metrics (behind METRICS_TOKEN), the demo IdP, OAuth, pages (each MCP
 * server's mount is served before them). `exact`: those of them also found by exact path.
 */
function brokerRoutes(
  config: Config,
  parts: {
    database: Database;
    logger: Logger;
    services: Services;
    metrics: BrokerMetrics;
    demoIdp: MountedDemoIdentityProvider | undefined;
  },
): { routers: Router[]; exact: readonly ExactRoute[] } {
  const { grants } = parts.services;
  const account: AccountDeps = {
    publicUrl: config.publicUrl,
    resourceName: config.resourceName,
    providerName: grants.upstreamLogin.providerName,
    browserIdentities: grants.browserIdentities,
    signIn: grants.accountSignIn,
    apps: grants.connectedApps,
    connect: { flow: grants.connectFlow, connections: grants.connections },
  };
  const authorizationServer = authorizationServerRoutes({
    config,
    clients: grants.clients,
    clientAuthentication: grants.clientAuthentication,
    transactions: grants.transactions,
    consents: grants.consents,
    tokens: grants.tokens,
    upstreamLogin: grants.upstreamLogin,
    browserIdentities: grants.browserIdentities,
    registrationLimit: grants.registrationLimit,
    signingKeys: parts.services.signingKeys,
    connectStep: { flow: grants.connectFlow, connections: grants.connections, upstreamLogin: grants.upstreamLogin },
  });
  const routers = [
    healthRouter(parts.database, parts.logger),
    // On the public listener only behind METRICS_TOKEN; METRICS_PORT serves it on loopback.
    ...(config.metricsToken ? [metricsRouter(parts.metrics, config.metricsToken)] : []),
    ...(parts.demoIdp ? [parts.demoIdp.router] : []),
    authorizationServer.router,
    frontDoorRouter({ config, providerName: grants.upstreamLogin.providerName }),
    callbackRouter(grants.upstreamLogin, config.publicUrl, accountSignInCallback(account)),
    connectCallbackRouter(grants.connectFlow, config.publicUrl),
    accountRouter(account),
  ];
  return { routers, exact: authorizationServer.exact };
}

/** The periodic sweep, the revocation feed and the audit sink: started now, stopped together. */
function startBackgroundWork(
  config: Config,
  options: BrokerOptions,
  services: Services,
  database: Database,
  logger: Logger,
): { stopSweep(): void; auditSink: AuditSink | undefined } {
  const { grants } = services;
  const sweepIntervalMs = options.sweepIntervalMs ?? TEN_MINUTES;
  const sweepTimer =
    sweepIntervalMs > 0
      ? setInterval(() => {
          grants.sweep().then(
            (result) => logger.debug({ result }, "sweep completed"),
            (err: unknown) => logger.warn({ err: firstLine(err) }, "sweep failed"),
          );
        }, sweepIntervalMs)
      : undefined;
  sweepTimer?.unref();
  grants.revocationFeed.start(options.revocationPollMs ?? REVOCATION_POLL_MS);
  const { auditSink: auditSinkConfig } = config.observability;
  const auditSink: AuditSink | undefined = auditSinkConfig
    ? createAuditSink(auditSinkConfig, auditOutbox(database.db), { ...options.auditSink, logger })
    : undefined;
  auditSink?.start();
  return { stopSweep: () => sweepTimer && clearInterval(sweepTimer), auditSink };
}

/** A reload that cannot be applied while the broker runs: the old catalogue stays. */
export class ReloadRefused extends Error {}

async function reloadCatalogue(
  next: Catalogue,
  p: { config: Config; served: ServedCatalogue; fronting: FrontingDeps; services: Services; logger: Logger },
): Promise<CatalogueChange> {
  const live = p.config.catalogue;
  if (!(live instanceof LiveCatalogue)) throw new ReloadRefused("this broker's catalogue was not loaded from its configuration: it cannot be reloaded");
  // The GitHub provider reads the memberships the rules name, a list made at start.
  const orgs = (c: Catalogue) => JSON.stringify([...new Set(narrowingRules(c).flatMap((r) => r.githubOrgs.map((o) => `${o.org}/${o.team ?? ""}`)))].sort());
  if (p.config.upstream.provider === "github" && orgs(live) !== orgs(next))
    throw new ReloadRefused("the GitHub organizations and teams the rules name have changed: restart the broker to apply this file");
  const previous = live.servers;
  live.replace(next);
  const change = await refront(p.served, previous, p.fronting);
  // Cached validations were decided under the old rules: each token is decided again at its next use.
  p.services.grants.validator.forgetAll();
  const ended = await p.services.grants.lifecycle.revokeResources(change.goneResources, "server_removed");
  p.logger.info({ ...change, grantsEnded: ended.length }, "configuration reloaded: the MCP servers of the file are served");
  return change;
}

/**
 * The graceful stop, in order: no new work (sweep, listening streams, stdio starts), the drain
 * within the deadline (answering streams get their errors just before it), then every part closes;
 * the audit sink after the drain (the last requests' events are in the trail), the database last.
 */
async function stopBroker(p: {
  deadlineMs: number;
  running: RunningServer | undefined;
  metricsServer: RunningServer | undefined;
  background: { stopSweep(): void; auditSink: AuditSink | undefined };
  streams: OpenStreams;
  servers: readonly FrontedServer[];
  services: Services;
  documentFetcher: { close(): Promise<void> };
  demoIdp: MountedDemoIdentityProvider | undefined;
  database: Database;
  tracing: Tracing | undefined;
  logger: Logger;
}): Promise<void> {
  p.background.stopSweep();
  // Open GET streams would hold the drain below until its deadline.
  p.streams.endListening();
  for (const server of p.servers) server.beginShutdown();
  const endStreams = setTimeout(() => p.streams.endAll(), Math.max(0, p.deadlineMs - STREAM_END_MARGIN_MS));
  await p.services.grants.revocationFeed.stop();
  await p.metricsServer?.close(1000);
  if (p.running) {
    const { forced } = await p.running.close(p.deadlineMs);
    if (forced) p.logger.warn({ deadlineMs: p.deadlineMs }, "shutdown deadline reached; open connections were cut");
  }
  clearTimeout(endStreams);
  for (const server of p.servers) await server.close();
  await p.documentFetcher.close();
  await p.demoIdp?.close();
  await p.services.grants.usage.flush();
  await p.background.auditSink?.stop();
  await p.database.close();
  await p.tracing?.shutdown();
}

/** What the fronted MCP servers share: the checks of every request, the session bindings, the counters. */
function frontingDepsOf(
  config: Config,
  options: BrokerOptions,
  parts: { logger: Logger; database: Database; services: Services; streams: OpenStreams; metrics: BrokerMetrics },
): FrontingDeps {
  const { grants } = parts.services;
  return {
    config,
    logger: parts.logger,
    clock: options.clock ?? systemClock,
    validator: grants.validator,
    revocations: grants.bus,
    sessionBinding: cachedSessionBinding(createMcpSessionStore(parts.database)),
    streams: parts.streams,
    observer: parts.metrics,
    allowedOrigin: allowedOrigin(config.publicUrl, config.allowedOrigins),
    mcpHandler: options.mcpHandler,
    assertions: parts.services.assertions,
    audit: (entry) => audit(parts.database.db, entry),
    endGrant: async (grantId) => {
      await grants.lifecycle.revokeGrant(grantId, "connection_invalid");
    },
  };
}

/** The parts a running broker holds, assembled by createBroker. */
interface BrokerParts {
  readonly config: Config;
  readonly logger: Logger;
  readonly database: Database;
  readonly tracing: Tracing | undefined;
  readonly services: Services;
  readonly app: Koa;
  readonly served: ServedCatalogue;
  readonly fronting: FrontingDeps;
  readonly streams: OpenStreams;
  readonly metrics: BrokerMetrics;
  readonly background: ReturnType<typeof startBackgroundWork>;
  readonly documentFetcher: { close(): Promise<void> };
  readonly demoIdp: MountedDemoIdentityProvider | undefined;
  readonly startProbes: Promise<Finding[]> | undefined;
}

/** The handle over the assembled parts: listening, reloading (one at a time) and stopping. */
function brokerHandle(p: BrokerParts): Broker {
  const { config, logger, database, services, app, served, streams, background } = p;
  let running: RunningServer | undefined;
  let metricsServer: RunningServer | undefined;
  let reloading: Promise<unknown> = Promise.resolve();
  return {
    config,
    logger,
    database,
    services,
    app,
    demoMcpUrl: served.servers.find((s) => s.demoMcpUrl)?.demoMcpUrl,
    stdioSessions: served.servers.find((s) => s.stdioSessions)?.stdioSessions,
    startProbes: p.startProbes,
    async listen() {
      running = await listen(app.callback(), config.port, config.host);
      if (config.metricsPort !== undefined) metricsServer = await listen(metricsApp(p.metrics, config.metricsToken), config.metricsPort, "127.0.0.1");
      return running;
    },
    metricsPort: () => metricsServer?.port,
    activity: () => ({ requests: running?.inFlight() ?? 0, ...streams.count() }),
    reopenAuditSink: () => background.auditSink?.reopen(),
    reload(next) {
      // One at a time: a second signal waits for the first reload to finish.
      const done = reloading.then(() => reloadCatalogue(next, { config, served, fronting: p.fronting, services, logger }));
      reloading = done.catch(() => undefined);
      return done;
    },
    stop: (deadlineMs = 10_000) =>
      stopBroker({
        deadlineMs,
        running,
        metricsServer,
        background,
        streams,
        servers: served.servers,
        services,
        documentFetcher: p.documentFetcher,
        demoIdp: p.demoIdp,
        database,
        tracing: p.tracing,
        logger,
      }),
  };
}

export async function createBroker(config: Config, options: BrokerOptions = {}): Promise<Broker> {
  const missing = missingMcpServer(config, options.mcpHandler !== undefined);
  if (missing) throw missing;
  const logger = options.logger ?? createLogger(config.logLevel, logFormatFor(config.logFormat) === "pretty" ? prettyDestination() : undefined);
  const { database, tracing } = await openStorage(config, options, logger);
  const documentFetcher = createGuardedFetcher({ allowPrivateNetworks: config.clients.cimd.allowPrivateNetworks, ...options.documentFetch });
  const services = createServices(config, database, logger, { clock: options.clock, documentFetcher });
  const { grants } = services;
  await endUnreadableGrants(services, logger);
  // The signing keys are read (or made) now: no request pays for it, and a store that cannot hold
  // them fails the start rather than the first MCP request.
  await services.signingKeys.signing();
  // The identity provider and the MCP server are probed as `check` probes them, each problem logged
  // once with what to change; the broker starts anyway (either may just be late).
  const startProbes = !config.demoMode && (options.startProbes ?? true) ? runStartProbes(config, services.provider, logger, packageVersion) : undefined;

  const demoIdp: MountedDemoIdentityProvider | undefined = config.demoMode ? await (await loadDemoMount(logger)).mountDemoIdentityProvider(config) : undefined;
  const streams = new OpenStreams();
  // Every server answers at PUBLIC_URL/mcp or below (a reload may add some): all of it is the MCP route.
  const mountPaths = publicPaths(config.publicUrl, "/mcp");
  const metrics = new BrokerMetrics(
    { databaseQueries: database.queryCount, validationCache: () => grants.validator.stats, liveGrants: () => services.grantListing.countLive() },
    mountPaths,
  );
  grants.sessions.observer = metrics;
  const fronting = frontingDepsOf(config, options, { logger, database, services, streams, metrics });
  const served = new ServedCatalogue(await frontServers(fronting));
  const app = createApp({
    config,
    logger,
    metrics: metrics.middleware(),
    // Before every router: no router has a path under /mcp, and each would match every MCP request's path against all of its routes.
    mcp: served.middleware(config.publicUrl),
    ...brokerRoutes(config, { database, logger, services, metrics, demoIdp }),
  });
  const background = startBackgroundWork(config, options, services, database, logger);
  return brokerHandle({
    config,
    logger,
    database,
    tracing,
    services,
    app,
    served,
    fronting,
    streams,
    metrics,
    background,
    documentFetcher,
    demoIdp,
    startProbes,
  });
}
