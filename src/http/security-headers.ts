// Security headers for every response. Pages get a CSP that allows only their inline style and
// images of their own (no page loads anything from a host a client chose); nothing may frame any
// response.
import type Koa from "koa";
import { isUnder } from "./public-paths.ts";
import { carryOnEveryAnswer, type HeaderList } from "./answer-headers.ts";

const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'";
const API_CSP = "default-src 'none'; frame-ancestors 'none'";

/** `apiPaths`: paths that never answer a page (the MCP endpoint), whose CSP is known before anything else runs. */
export function securityHeaders(options: { https: boolean; apiPaths?: readonly string[] }): Koa.Middleware {
  const apiPaths = options.apiPaths ?? [];
  const every: HeaderList = [
    "x-content-type-options",
    "nosniff",
    "x-frame-options",
    "DENY",
    "referrer-policy",
    "no-referrer",
    "cross-origin-opener-policy",
    "same-origin",
    ...(options.https ? ["strict-transport-security", "max-age=31536000; includeSubDomains"] : []),
  ];
  const api: HeaderList = [...every, "content-security-policy", API_CSP];
  return (ctx, next) => {
    // Carried on the response and written with its head (answer-headers.ts): nothing the route or
    // the MCP server answers replaces them.
    if (isUnder(apiPaths, ctx.path)) {
      carryOnEveryAnswer(ctx.res, api);
      // Known now, so next() is returned rather than awaited: no frame is kept while an answer is relayed.
      return next();
    }
    carryOnEveryAnswer(ctx.res, every);
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
