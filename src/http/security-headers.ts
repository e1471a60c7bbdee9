// Security headers for every response. Pages get a CSP that allows only their inline style and
// images of their own (no page loads anything from a host a client chose); nothing may frame any
// response.
import type Koa from "koa";
import { isUnder } from "./public-paths.ts";

const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'";
const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** `apiPaths`: paths that never answer a page (the MCP endpoint), whose CSP is set before anything else runs. */
export function securityHeaders(options: { https: boolean; apiPaths?: readonly string[] }): Koa.Middleware {
  const apiPaths = options.apiPaths ?? [];
  return (ctx, next) => {
    // Straight onto the response: Koa's ctx.set builds three arrays and a closure per call, about
    // 4 KB of garbage per /mcp request over this and the other per-request headers.
    const res = ctx.res;
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("X-Frame-Options", "DENY");
    res.setHeader("Referrer-Policy", "no-referrer");
    res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
    if (options.https) res.setHeader("Strict-Transport-Security", "max-age=31536000; includeSubDomains");
    if (isUnder(apiPaths, ctx.path)) {
      // Known now, so next() is returned rather than awaited: no frame is kept while an answer is relayed.
      res.setHeader("Content-Security-Policy", API_CSP);
      return next();
    }
    return withContentSecurityPolicy(ctx, next);
  };
}

/** A media type of text/html, with or without parameters, in any letter case (what Koa's ctx.response.is("html") matches). */
const HTML = /^\s*text\/html\s*(;|$)/i;

/**
 * The CSP of what the route answered: a page's, or none at all for anything else (unless the route
 * set one). Read and set on the response itself: Koa's ctx.response.is parses the media type and
 * ctx.set allocates, on every request that is not the MCP endpoint's (the token endpoint's too).
 */
async function withContentSecurityPolicy(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  await next();
  const res = ctx.res;
  if (res.headersSent) return;
  const type = res.getHeader("Content-Type");
  if (typeof type === "string" && HTML.test(type)) res.setHeader("Content-Security-Policy", PAGE_CSP);
  else if (!res.hasHeader("Content-Security-Policy")) res.setHeader("Content-Security-Policy", API_CSP);
}
