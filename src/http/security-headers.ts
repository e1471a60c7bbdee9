// Security headers for every response. Pages get a CSP that allows only their inline style and
// images of their own (no page loads anything from a host a client chose); nothing may frame any
// response.
import type Koa from "koa";

export function securityHeaders(options: { https: boolean }): Koa.Middleware {
  return async (ctx, next) => {
    // Straight onto the response: Koa's ctx.set builds three arrays and a closure per call, about
    // 4 KB of garbage per /mcp request over this and the other per-request headers.
    const res = ctx.res;
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("X-Frame-Options", "DENY");
    res.setHeader("Referrer-Policy", "no-referrer");
    res.setHeader("Cross-Origin-Opener-Policy", "same-origin");
    if (options.https) res.setHeader("Strict-Transport-Security", "max-age=31536000; includeSubDomains");
    await next();
    // A relayed MCP answer has written its own head already: nothing to add, nothing to parse.
    if (ctx.headerSent) return;
    if (ctx.response.is("html")) {
      ctx.set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'");
    } else if (!ctx.response.get("Content-Security-Policy")) {
      ctx.set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
    }
  };
}
