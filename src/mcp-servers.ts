// The MCP servers of the catalogue, each behind its backend (the streaming HTTP proxy, a stdio
// process pool, the demo server or an in-process handler) and mounted at its own paths: its
// router does the Origin check and bearer authentication with that server's audience, so a token
// issued for one server is refused at every other. Wiring only: the pieces live in gateway/ and stdio/.
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import type Router from "@koa/router";
import type { Config } from "./config/load.ts";
import type { McpServerEntry } from "./config/catalogue.ts";
import type { Logger } from "./logger.ts";
import { mcpRouter, type McpHandler } from "./gateway/router.ts";
import { createMcpProxy, type McpProxy, type McpProxyOptions } from "./gateway/proxy.ts";
import type { OpenStreams } from "./gateway/open-streams.ts";
import { misfitWarnings } from "./gateway/mcp-server-misfits.ts";
import { stdioMcpHandler } from "./gateway/stdio-handler.ts";
import type { OriginPredicate } from "./gateway/origin-check.ts";
import type { McpSessionBinding } from "./gateway/session-binding.ts";
import { SessionRegistry } from "./stdio/session-registry.ts";
import { openChildGuard } from "./stdio/child-guard.ts";
import { reapLeftovers } from "./stdio/child-ledger.ts";
import type { Clock } from "./lib/clock.ts";
import { startDemoMcpServer, type DemoMcpServer } from "./demo/mcp-server.ts";
import type { AccessValidator } from "./grants/access-validation.ts";
import type { RevocationBus } from "./grants/context.ts";
import { DEFAULT_SCOPE } from "./grants/types.ts";
import { knownScopes } from "./grants/scope.ts";
import { publicPaths } from "./http/public-paths.ts";

/** One server of the catalogue as the broker runs it. */
export interface FrontedServer {
  readonly entry: McpServerEntry;
  /** The paths it answers at below the listener: its own (with sub-paths), and /mcp for the default. */
  readonly mountPaths: readonly string[];
  readonly routers: readonly Router[];
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

async function backendOf(
  entry: McpServerEntry,
  deps: FrontingDeps,
  mountPaths: readonly string[],
): Promise<{ handler: McpHandler; stdioSessions?: SessionRegistry; proxy?: McpProxy; demo?: DemoMcpServer }> {
  const { config, logger } = deps;
  const log = config.catalogue.servers.length > 1 ? logger.child({ server: entry.name }) : logger;
  if (entry.backend.kind === "stdio") {
    const registry = new SessionRegistry({
      server: entry.backend.server,
      logger: log,
      clock: deps.clock,
      guard: openChildGuard(ledgerDir(config, entry), log),
    });
    // A revoked grant's children stop at once, wherever the revocation came from (this process or the feed).
    deps.revocations.subscribe((revocation) => void registry.endGrants(revocation.grantIds ?? []));
    return { handler: stdioMcpHandler({ registry, passesToken: entry.backend.server.tokenEnv !== undefined, logger: log }), stdioSessions: registry };
  }
  if (entry.backend.kind === "demo" && deps.mcpHandler) return { handler: deps.mcpHandler };
  const demo = entry.backend.kind === "demo" ? await startDemoMcpServer() : undefined;
  const targetUrl = entry.backend.kind === "http" ? entry.backend.url : demo!.url;
  const proxy = createMcpProxy({
    targetUrl,
    timeoutMs: config.proxyTimeoutMs,
    forwardUpstreamToken: entry.forwardUpstreamToken,
    serverName: entry.name,
    logger: log,
    sessionBinding: deps.sessionBinding,
    mountPaths,
    observer: deps.observer,
    answered: misfitWarnings({ logger: log, targetUrl }),
    streams: deps.streams,
    publicUrl: config.publicUrl,
    // The MCP server's 401 and 403 insufficient_scope become the broker's own challenge.
    challenge: {
      resourceMetadataUrl: resourceMetadataUrl(config.publicUrl, entry.path),
      requiredScope: DEFAULT_SCOPE,
      knownScopes: knownScopes(entry.scopes.supported),
    },
  });
  return { handler: proxy.middleware, proxy, ...(demo ? { demo } : {}) };
}

export async function frontServers(deps: FrontingDeps): Promise<FrontedServer[]> {
  const { config } = deps;
  reapRemovedServers(config, deps.logger);
  const fronted: FrontedServer[] = [];
  for (const entry of config.catalogue.servers) {
    const own = publicPaths(config.publicUrl, entry.path);
    // The default server of a larger catalogue also answers at /mcp itself (not below it: those
    // paths are the other servers').
    const alias = entry.isDefault && entry.path !== "/mcp" ? publicPaths(config.publicUrl, "/mcp") : [];
    const mountPaths = [...own, ...alias];
    const backend = await backendOf(entry, deps, mountPaths);
    const routerFor = (mounts: readonly string[], metadataPath: string, subPaths: boolean) =>
      mcpRouter({
        validator: deps.validator,
        resource: entry.resourceUrl,
        resourceMetadataUrl: resourceMetadataUrl(config.publicUrl, metadataPath),
        requiredScope: DEFAULT_SCOPE,
        scopeImplies: entry.scopes.implies,
        handler: backend.handler,
        mountPaths: mounts,
        subPaths,
        allowedOrigin: deps.allowedOrigin,
      });
    const routers = [routerFor(own, entry.path, true), ...(alias.length ? [routerFor(alias, "/mcp", false)] : [])];
    fronted.push({
      entry,
      mountPaths,
      routers,
      stdioSessions: backend.stdioSessions,
      demoMcpUrl: backend.demo?.url,
      beginShutdown: () => backend.stdioSessions?.beginShutdown(),
      async close() {
        await backend.proxy?.close();
        await backend.stdioSessions?.close();
        await backend.demo?.close();
      },
    });
  }
  return fronted;
}
