// The Origin check of the MCP endpoint (Streamable HTTP, 2025-11-25 and 2026-07-28: "If the Origin
// header is present and invalid, servers MUST respond with HTTP 403"), against DNS rebinding and
// pages of other sites. It runs before authentication, for both backends, so a refused request
// reaches neither the token check nor the MCP server. No Origin (native clients, servers) passes:
// only browsers send one.
import type Koa from "koa";
import { isLoopbackHost } from "../config/load.ts";
import type { AllowedOrigins } from "../config/client-interop.ts";
import { jsonRpcError } from "./json-rpc-error.ts";

/** Whether a browser page of this origin may call the MCP endpoint. */
export type OriginPredicate = (origin: string) => boolean;

/** PUBLIC_URL's origin, the listed ones, and in demo mode any http(s) origin on a loopback host. */
export function allowedOrigin(publicUrl: string, allowed: AllowedOrigins): OriginPredicate {
  const exact = new Set([new URL(publicUrl).origin, ...allowed.origins]);
  return (origin) => {
    if (exact.has(origin)) return true;
    if (!allowed.loopback) return false;
    try {
      const url = new URL(origin);
      return (url.protocol === "http:" || url.protocol === "https:") && url.origin === origin && isLoopbackHost(url.hostname);
    } catch {
      return false;
    }
  };
}

export function originCheck(allowed: OriginPredicate): Koa.Middleware {
  // Not async, and next() returned rather than awaited: no suspended frame per request.
  return (ctx, next) => {
    const origin = ctx.get("origin");
    if (origin !== "" && !allowed(origin)) {
      ctx.state.log?.info({ origin: origin.slice(0, 200) }, "MCP request refused: Origin not allowed");
      return jsonRpcError(
        ctx,
        403,
        -32000,
        `Forbidden: web pages from ${JSON.stringify(origin.slice(0, 200))} may not call this MCP endpoint. The operator can allow an origin with ALLOWED_ORIGINS.`,
      );
    }
    return next();
  };
}
