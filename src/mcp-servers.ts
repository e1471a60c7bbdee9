// The MCP servers of the catalogue, each behind its backend (the streaming HTTP proxy, a stdio
// process pool, the demo server or an in-process handler) and mounted at its own paths: its
// router does the Origin check and bearer authentication with that server's audience, so a token
// issued for one server is refused at every other. Wiring only: the pieces live in gateway/ and stdio/.
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import type Koa from "koa";
import { jsonRpcError } from "./gateway/json-rpc-error.ts";
import type { Config } from "./config/load.ts";
import { connectionByName, type McpServerEntry } from "./config/catalogue.ts";
import type { Logger } from "./logger.ts";
import { mcpRoute, type McpHandler } from "./gateway/router.ts";
import { createMcpProxy, type McpProxy, type McpProxyOptions } from "./gateway/proxy.ts";
import type { OpenStreams } from "./gateway/open-streams.ts";
import { misfitWarnings } from "./gateway/mcp-server-misfits.ts";
import { stdioMcpHandler } from "./gateway/stdio-handler.ts";
import type { OriginPredicate } from "./gateway/origin-check.ts";
import type { FrontEndOptions } from "./gateway/front-end.ts";
import { ElicitingGrants } from "./gateway/connection-gate.ts";
import type { BrokerChallenge } from "./gateway/scope-challenge.ts";
import type { McpSessionBinding } from "./gateway/session-binding.ts";
import { SessionRegistry } from "./stdio/session-registry.ts";
import { openChildGuard } from "./stdio/child-guard.ts";
import { reapLeftovers } from "./stdio/child-ledger.ts";
import type { Clock } from "./lib/clock.ts";
import type { IdentityAssertions } from "./grants/identity-assertion.ts";
import { startDemoMcpServer, type DemoMcpServer } from "./demo/mcp-server.ts";
import type { AccessValidator } from "./grants/access-validation.ts";
import type { RevocationBus } from "./grants/context.ts";
import { DEFAULT_SCOPE } from "./grants/types.ts";
import { knownScopes } from "./grants/scope.ts";
import { isUnder, publicPaths } from "./http/public-paths.ts";
import { ToolPolicy } from "./grants/tool-policy.ts";
import type { AuditEntry } from "./grants/audit.ts";
import type { CallerIdentity } from "./grants/caller-identity.ts";
import type { RefusedCall } from "./gateway/tool-calls.ts";
import { firstLine } from "./lib/error-text.ts";

/** One server of the catalogue as the broker runs it. */
export interface FrontedServer {
  readonly entry: McpServerEntry;
  /** Its own paths (with or without PUBLIC_URL's path), sub-paths included. */
  readonly ownPaths: readonly string[];
  /** /mcp itself, where the default server of a larger catalogue also answers. */
  readonly aliasPaths: readonly string[];
  /** Its route at its own paths: Origin check, bearer authentication with its audience, its backend. */
  readonly route: Koa.Middleware;
  /** The same at /mcp (challenges there point at /mcp's metadata), when it is the default of a larger catalogue. */
  readonly aliasRoute: Koa.Middleware | undefined;
  /** Its stdio sessions and their children (a stdio server). */
  readonly stdioSessions: SessionRegistry | undefined;
  /** The demo MCP server's URL (the demo entry without an in-process handler). */
  readonly demoMcpUrl: string | undefined;
  /** No new stdio child from now on (the broker is stopping). */
  beginShutdown(): void;
  close(): Promise<void>;
}

export interface FrontingDeps {
  readonly config: Config;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly validator: AccessValidator;
  readonly revocations: RevocationBus;
  readonly sessionBinding: McpSessionBinding;
  readonly streams: OpenStreams;
  readonly observer: McpProxyOptions["observer"];
  readonly allowedOrigin: OriginPredicate;
  /** The library use: serves the demo entry in-process instead of the demo MCP server. */
  readonly mcpHandler: McpHandler | undefined;
  /** Signs X-Auth-Assertion for each request to an HTTP server. */
  readonly assertions: IdentityAssertions;
  /** Writes an audit event (a tool call the rules refused). */
  readonly audit: (entry: AuditEntry) => Promise<void>;
  /** Ends a grant whose server needs a connected account the user lost (gateway/connection-gate.ts). */
  readonly endGrant: (grantId: string) => Promise<void>;
}

/** The protected resource metadata URL of a server reached at `mountPath` (PUBLIC_URL/.well-known/oauth-protected-resource/mcp…). */
function resourceMetadataUrl(publicUrl: string, mountPath: string): string {
  return `${publicUrl}/.well-known/oauth-protected-resource${mountPath}`;
}

/**
 * Where a stdio server's ledger of children lives: the data folder's `stdio-children` for the
 * catalogue of one (as before the catalogue existed, so a restart still finds its leftovers), a
 * folder per server below it otherwise.
 */
function ledgerDir(config: Config, entry: McpServerEntry): string {
  const root = path.join(config.dataDir, "stdio-children");
  return config.catalogue.source.kind === "environment" ? root : path.join(root, entry.name);
}

/**
 * Children left by a broker that died are stopped before any new one starts, including those of a
 * server the catalogue no longer lists (its folder is still there).
 */
function reapRemovedServers(config: Config, logger: Logger): void {
  const root = path.join(config.dataDir, "stdio-children");
  if (config.catalogue.source.kind === "environment" || !existsSync(root)) return;
  const listed = new Set(config.catalogue.servers.map((s) => s.name));
  for (const entry of readdirSync(root, { withFileTypes: true })) {
    if (entry.isDirectory() && !listed.has(entry.name)) reapLeftovers(path.join(root, entry.name), logger);
  }
}

/** Each refused tool call in the audit trail: who, which client, which server and tool, which rule. */
function toolDeniedAudit(entry: McpServerEntry, deps: FrontingDeps, log: Logger) {
  return (refused: RefusedCall, identity: CallerIdentity): void => {
    deps
      .audit({
        type: "tool.denied",
        clientId: identity.clientId,
        grantId: identity.grantId,
        subject: identity.subject,
        detail: { server: entry.name, tool: refused.tool.slice(0, 200), reason: refused.decision.reason, rule: refused.decision.rule },
      })
      .catch((err: unknown) => log.warn({ err: firstLine(err) }, "could not record a refused tool call in the audit trail"));
  };
}

/**
 * What the /mcp front end (gateway/front-end.ts) needs of a server, whichever its backend: its
 * logger, its tool rules with their audit trail, and how the broker challenges for a scope.
 */
function frontEndOptions(entry: McpServerEntry, deps: FrontingDeps, log: Logger): FrontEndOptions & { readonly challenge: BrokerChallenge } {
  const toolPolicy = entry.tools.length > 0 ? new ToolPolicy(entry.tools, entry.scopes.implies) : undefined;
  // The tool rules' missing scope, and the MCP server's 401 and 403 insufficient_scope, become the broker's own challenge.
  const challenge = {
    resourceMetadataUrl: resourceMetadataUrl(deps.config.publicUrl, entry.path),
    requiredScope: DEFAULT_SCOPE,
    knownScopes: knownScopes(entry.scopes.supported),
  };
  const { config } = deps;
  return {
    logger: log,
    ...(toolPolicy ? { toolPolicy, toolDenied: toolDeniedAudit(entry, deps, log) } : {}),
    challenge,
    ...(entry.connection
      ? {
          connectionGate: {
            connectUrl: (name: string) => `${config.publicUrl}/account/connect/${encodeURIComponent(name)}`,
            title: (name: string) => connectionByName(config.catalogue, name)?.title ?? name,
            endGrant: (identity: CallerIdentity) => deps.endGrant(identity.grantId),
            challenge,
            eliciting: new ElicitingGrants(),
          },
        }
      : {}),
  };
}

async function backendOf(
  entry: McpServerEntry,
  deps: FrontingDeps,
  mountPaths: readonly string[],
): Promise<{ handler: McpHandler; stdioSessions?: SessionRegistry; proxy?: McpProxy; demo?: DemoMcpServer; unsubscribe?: () => void }> {
  const { config, logger } = deps;
  const log = config.catalogue.servers.length > 1 ? logger.child({ server: entry.name }) : logger;
  const front = frontEndOptions(entry, deps, log);
  if (entry.backend.kind === "stdio") {
    const registry = new SessionRegistry({
      server: entry.backend.server,
      logger: log,
      clock: deps.clock,
      guard: openChildGuard(ledgerDir(config, entry), log),
      connectionEnv: entry.connection?.inject.kind === "env" ? entry.connection.inject.variable : undefined,
    });
    // A revoked grant's children stop at once, wherever the revocation came from (this process or the feed).
    const unsubscribe = deps.revocations.subscribe((revocation) => void registry.endGrants(revocation.grantIds ?? []));
    return {
      handler: stdioMcpHandler({ ...front, registry, passesToken: entry.backend.server.tokenEnv !== undefined }),
      stdioSessions: registry,
      unsubscribe,
    };
  }
  if (entry.backend.kind === "demo" && deps.mcpHandler) return { handler: deps.mcpHandler };
  const demo =
    entry.backend.kind === "demo"
      ? await startDemoMcpServer({ assertion: { jwksUrl: `${config.publicUrl}/.well-known/jwks.json`, issuer: config.publicUrl, audience: entry.resourceUrl } })
      : undefined;
  const targetUrl = entry.backend.kind === "http" ? entry.backend.url : demo!.url;
  const proxy = createMcpProxy({
    ...front,
    targetUrl,
    timeoutMs: config.proxyTimeoutMs,
    forwardUpstreamToken: entry.forwardUpstreamToken,
    serverName: entry.name,
    sessionBinding: deps.sessionBinding,
    mountPaths,
    observer: deps.observer,
    answered: misfitWarnings({ logger: log, targetUrl }),
    streams: deps.streams,
    publicUrl: config.publicUrl,
    assertion: deps.assertions.forAudience(entry.resourceUrl),
    connectionInject: entry.connection?.inject,
  });
  return { handler: proxy.middleware, proxy, ...(demo ? { demo } : {}) };
}

/** The server answering at a path: its name (for the access line and metrics), its route, and the route's pattern (for traces). */
interface RouteFound {
  readonly name: string;
  readonly route: Koa.Middleware;
  /** The mount, or the mount and `/{*rest}` below it: a bounded set of names, never the path. */
  readonly pattern: string;
}

/**
 * The one route of every MCP server: PUBLIC_URL/mcp and below, dispatched by path to the server
 * mounted there (its own route then checks Origin, authenticates with its audience and serves).
 * The set of servers can be replaced while the broker runs (a reload): requests already dispatched
 * keep the server they were given. A path no server answers at gets a JSON-RPC 404.
 */
export class ServedCatalogue {
  /**
   * Mount path → its server, the route answering at the mount itself (none: an alias mount of a
   * server without an alias route) and the one below it (none for an alias: those paths are other servers').
   */
  private mounts = new Map<string, { server: FrontedServer; at: RouteFound | undefined; below: RouteFound | undefined }>();

  constructor(servers: readonly FrontedServer[]) {
    this.replace(servers);
  }

  get servers(): FrontedServer[] {
    return [...new Set([...this.mounts.values()].map((m) => m.server))];
  }

  replace(servers: readonly FrontedServer[]): void {
    const mounts = new Map<string, { server: FrontedServer; at: RouteFound | undefined; below: RouteFound | undefined }>();
    for (const server of servers) {
      const { name } = server.entry;
      for (const mount of server.ownPaths) {
        mounts.set(mount, { server, at: { name, route: server.route, pattern: mount }, below: { name, route: server.route, pattern: `${mount}/{*rest}` } });
      }
      for (const mount of server.aliasPaths) {
        const at = server.aliasRoute && { name, route: server.aliasRoute, pattern: mount };
        if (!mounts.has(mount)) mounts.set(mount, { server, at, below: undefined });
      }
    }
    this.mounts = mounts;
  }

  /**
   * The route answering at `path`: a server's mount exactly, or its own mount above it (the /mcp
   * alias has no sub-paths: those are the other servers'). A few map lookups, however many servers.
   */
  routeAt(path: string): RouteFound | undefined {
    const exact = this.mounts.get(path);
    if (exact) return exact.at;
    for (let cut = path.lastIndexOf("/"); cut > 0; cut = path.lastIndexOf("/", cut - 1)) {
      const mount = this.mounts.get(path.slice(0, cut));
      if (mount) return mount.below;
    }
    return undefined;
  }

  /**
   * PUBLIC_URL/mcp and below, before every router: a path test and a map lookup, where a router
   * would match the path against its patterns and compose a chain for every request.
   */
  middleware(publicUrl: string): Koa.Middleware {
    const paths = publicPaths(publicUrl, "/mcp");
    return (ctx, next) => {
      if (!isUnder(paths, ctx.path)) return next();
      const found = this.routeAt(ctx.path);
      if (!found) {
        ctx.state.errorFormat = "jsonrpc";
        return jsonRpcError(ctx, 404, -32000, "No MCP server answers at this path: check the URL (PUBLIC_URL/mcp/<name>).");
      }
      ctx.state.server = found.name;
      ctx.state.route = found.pattern;
      return found.route(ctx, next);
    };
  }
}

/** One server of the catalogue behind its backend, with its routes. */
async function frontServer(entry: McpServerEntry, deps: FrontingDeps): Promise<FrontedServer> {
  const { config } = deps;
  const own = publicPaths(config.publicUrl, entry.path);
  // The default server of a larger catalogue also answers at /mcp itself (not below it: those
  // paths are the other servers').
  const alias = entry.isDefault && entry.path !== "/mcp" ? publicPaths(config.publicUrl, "/mcp") : [];
  const backend = await backendOf(entry, deps, [...own, ...alias]);
  const routeFor = (metadataPath: string) =>
    mcpRoute({
      validator: deps.validator,
      resource: entry.resourceUrl,
      resourceMetadataUrl: resourceMetadataUrl(config.publicUrl, metadataPath),
      requiredScope: DEFAULT_SCOPE,
      scopeImplies: entry.scopes.implies,
      handler: backend.handler,
      allowedOrigin: deps.allowedOrigin,
    });
  return {
    entry,
    ownPaths: own,
    aliasPaths: alias,
    route: routeFor(entry.path),
    aliasRoute: alias.length ? routeFor("/mcp") : undefined,
    stdioSessions: backend.stdioSessions,
    demoMcpUrl: backend.demo?.url,
    beginShutdown: () => backend.stdioSessions?.beginShutdown(),
    async close() {
      backend.unsubscribe?.();
      await backend.proxy?.close();
      await backend.stdioSessions?.close();
      await backend.demo?.close();
    },
  };
}

export async function frontServers(deps: FrontingDeps): Promise<FrontedServer[]> {
  reapRemovedServers(deps.config, deps.logger);
  const fronted: FrontedServer[] = [];
  for (const entry of deps.config.catalogue.servers) fronted.push(await frontServer(entry, deps));
  return fronted;
}

/** What a reload changed: the servers by name. */
export interface CatalogueChange {
  readonly added: readonly string[];
  readonly changed: readonly string[];
  readonly removed: readonly string[];
  readonly unchanged: readonly string[];
  /** Resource URIs no server answers for any more: their grants end. */
  readonly goneResources: readonly string[];
}

/**
 * Serves `next` instead of what `served` serves: a server whose entry is the same keeps running
 * (its sessions and children untouched); a changed or removed one is stopped first (a stdio
 * server's children with it), then the new and changed ones start; `served` switches at once.
 * `next` must already be the configuration's catalogue (the caller replaces the live one first).
 */
export async function refront(served: ServedCatalogue, previous: readonly McpServerEntry[], deps: FrontingDeps): Promise<CatalogueChange> {
  const next = deps.config.catalogue.servers;
  const same = (a: McpServerEntry, b: McpServerEntry) => JSON.stringify(a) === JSON.stringify(b);
  const running = new Map(served.servers.map((s) => [s.entry.name, s]));
  const kept: FrontedServer[] = [];
  const stopped: FrontedServer[] = [];
  for (const [name, server] of running) {
    const entry = next.find((e) => e.name === name);
    if (entry && same(entry, server.entry)) kept.push(server);
    else stopped.push(server);
  }
  for (const server of stopped) await server.close();
  const started: FrontedServer[] = [];
  for (const entry of next) if (!kept.some((k) => k.entry.name === entry.name)) started.push(await frontServer(entry, deps));
  served.replace(next.map((e) => [...kept, ...started].find((s) => s.entry.name === e.name)!));
  const nextResources = new Set(next.map((e) => e.resourceUrl));
  return {
    added: started.filter((s) => !running.has(s.entry.name)).map((s) => s.entry.name),
    changed: started.filter((s) => running.has(s.entry.name)).map((s) => s.entry.name),
    removed: stopped.filter((s) => !next.some((e) => e.name === s.entry.name)).map((s) => s.entry.name),
    unchanged: kept.map((s) => s.entry.name),
    goneResources: previous.map((e) => e.resourceUrl).filter((r) => !nextResources.has(r)),
  };
}
