// Security headers for every response. Pages get a CSP that allows only their inline style and
// images of their own (no page loads anything from a host a client chose); nothing may frame any
// response.
import type Koa from "koa";

export function securityHeaders(options: { https: boolean }): Koa.Middleware {
  return async (ctx, next) => {
    ctx.set("X-Content-Type-Options", "nosniff");
    ctx.set("X-Frame-Options", "DENY");
    ctx.set("Referrer-Policy", "no-referrer");
    ctx.set("Cross-Origin-Opener-Policy", "same-origin");
    if (options.https) ctx.set("Strict-Transport-Security", "max-age=31536000; includeSubDomains");
    await next();
    if (ctx.response.is("html")) {
      ctx.set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'");
    } else if (!ctx.response.get("Content-Security-Policy")) {
      ctx.set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'");
    }
  };
}
