// PUBLIC_URL/mcp and below: bearer authentication, then the streaming proxy (or, for library use,
// any Koa handler that serves MCP in-process).
import Router from "@koa/router";
import type Koa from "koa";
import { bearerAuth, type BearerOptions, type BearerState } from "./bearer.ts";
import { cors } from "../http/cors.ts";
import type { CallerIdentity } from "./identity.ts";

export type McpHandler = (ctx: Koa.Context, identity: CallerIdentity) => Promise<void>;

export function mcpRouter(options: BearerOptions & { readonly handler: McpHandler; readonly mountPaths?: readonly string[] }): Router {
  const router = new Router();
  const mounts = [...(options.mountPaths ?? ["/mcp"])];
  const auth = bearerAuth(options);
  // Browser-based clients (the MCP Inspector) preflight without a token.
  const allowBrowsers = cors({ methods: "GET, POST, DELETE, OPTIONS" });
  const forward: Koa.Middleware = async (ctx) => options.handler(ctx, (ctx.state as BearerState).identity);
  router.all(mounts, allowBrowsers, auth, forward);
  router.all(mounts.map((mount) => `${mount}/{*rest}`), allowBrowsers, auth, forward);
  return router;
}
