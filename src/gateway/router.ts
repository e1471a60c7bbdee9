// PUBLIC_URL/mcp and below: the Origin check, bearer authentication, then the streaming proxy (or, for library use,
// any Koa handler that serves MCP in-process).
//
// Every error of this router reaches the client as a JSON-RPC error body, whoever raised it (the
// bearer middleware, the session binding's database, an unexpected fault): MCP clients read
// JSON-RPC. The bearer middleware's 401/403 keep their WWW-Authenticate challenge (RFC 6750), which
// is where MCP clients look for what to do.
import Router from "@koa/router";
import type Koa from "koa";
import { bearerAuth, type BearerOptions } from "./bearer.ts";
import { cors } from "../http/cors.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { originCheck, type OriginPredicate } from "./origin-check.ts";

export type McpHandler = (ctx: Koa.Context, identity: CallerIdentity) => Promise<void>;

export type McpRouterOptions = McpRouteOptions & {
  readonly mountPaths?: readonly string[];
  /** Also below the mount paths (`/mcp/anything`), as MCP servers with their own sub-paths need (default true). */
  readonly subPaths?: boolean;
};

export type McpRouteOptions = {
  readonly handler: McpHandler;
  /**
   * The browser origins that may call the endpoint (origin-check.ts); a request with another
   * Origin gets 403 before anything else. Without it (an application that checks Origin in front
   * of the router) Origin is not checked and CORS grants any origin.
   */
  readonly allowedOrigin?: OriginPredicate;
} & (
  | BearerOptions
  | {
      /**
       * Authenticates the caller instead of the broker's bearer tokens: sets ctx.state.identity or
       * throws (an application that embeds the router with its own authentication; tests).
       */
      readonly authenticate: Koa.Middleware;
    }
);

/**
 * The MCP endpoint for a request already known to be at one of its paths: the JSON-RPC error
 * format, the Origin check, CORS, authentication, then the handler. A fixed chain of plain calls,
 * built once: no router matches the path again, and no per-request composition (each /mcp request
 * used to pass two @koa/router dispatches, about 4 KB of garbage, bench row (m)).
 */
export function mcpRoute(options: McpRouteOptions): Koa.Middleware {
  const auth = "authenticate" in options ? options.authenticate : bearerAuth(options);
  // Origin first: a page of a foreign site gets nothing, not even a preflight grant or a challenge.
  const origins: Koa.Middleware | undefined = options.allowedOrigin && originCheck(options.allowedOrigin);
  // Browser-based clients (the MCP Inspector) preflight without a token.
  const allowBrowsers = cors({ methods: "GET, POST, DELETE, OPTIONS", ...(options.allowedOrigin ? { allowOrigin: options.allowedOrigin } : {}) });
  const forward = (ctx: Koa.Context) => {
    const { identity } = ctx.state;
    if (!identity) return Promise.reject(new Error("the MCP route's authentication set no caller identity"));
    return options.handler(ctx, identity);
  };
  const authenticated = (ctx: Koa.Context) => auth(ctx, () => forward(ctx));
  const browsers = (ctx: Koa.Context) => allowBrowsers(ctx, () => authenticated(ctx));
  return (ctx) => {
    // The error format of the MCP endpoint, chosen before anything on the route can fail.
    ctx.state.errorFormat = "jsonrpc";
    return origins ? origins(ctx, () => browsers(ctx)) : browsers(ctx);
  };
}

/** mcpRoute on a router of its own, at the mount paths (and below them): for an application that embeds the endpoint. */
export function mcpRouter(options: McpRouterOptions): Router {
  const router = new Router();
  const mounts = [...(options.mountPaths ?? ["/mcp"])];
  const route = mcpRoute(options);
  router.all(mounts, route);
  if (options.subPaths ?? true)
    router.all(
      mounts.map((mount) => `${mount}/{*rest}`),
      route,
    );
  return router;
}
