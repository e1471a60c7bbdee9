// A fixed-window limiter per client IP (behind a proxy, ctx.ip honours TRUST_PROXY).
import type Koa from "koa";
import { OAuthError } from "./errors.ts";

export function rateLimit(options: { limit: number; windowMs: number; what: string }): Koa.Middleware {
  const windows = new Map<string, { start: number; count: number }>();
  return async (ctx, next) => {
    const now = Date.now();
    let w = windows.get(ctx.ip);
    if (!w || now - w.start >= options.windowMs) {
      if (windows.size > 10_000) windows.clear();
      w = { start: now, count: 0 };
      windows.set(ctx.ip, w);
    }
    if (++w.count > options.limit) {
      const retry = Math.ceil((w.start + options.windowMs - now) / 1000);
      throw new OAuthError("invalid_request", `Too many ${options.what} from this address; retry in ${retry} s.`, { status: 429, headers: { "Retry-After": String(retry) } });
    }
    await next();
  };
}
