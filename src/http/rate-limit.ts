// A fixed-window limiter per client IP (behind a proxy, ctx.ip honours TRUST_PROXY). In memory:
// each instance counts on its own, which is enough to stop one address flooding the registry.
import type Koa from "koa";
import { OAuthError } from "./errors.ts";

const MAX_TRACKED = 10_000;

export function rateLimit(options: { limit: number; windowMs: number; what: string }): Koa.Middleware {
  const windows = new Map<string, { start: number; count: number }>();
  return async (ctx, next) => {
    const now = Date.now();
    let w = windows.get(ctx.ip);
    if (!w || now - w.start >= options.windowMs) {
      if (windows.size >= MAX_TRACKED) {
        for (const [ip, old] of windows) if (now - old.start >= options.windowMs) windows.delete(ip);
        // Still full: many addresses within one window. Forgetting them all errs on the side of service.
        if (windows.size >= MAX_TRACKED) windows.clear();
      }
      w = { start: now, count: 0 };
      windows.set(ctx.ip, w);
    }
    if (++w.count > options.limit) {
      const retry = Math.max(1, Math.ceil((w.start + options.windowMs - now) / 1000));
      throw new OAuthError("invalid_request", `Too many ${options.what} from this address; retry in ${retry} s.`, { status: 429, headers: { "Retry-After": String(retry) } });
    }
    await next();
  };
}
