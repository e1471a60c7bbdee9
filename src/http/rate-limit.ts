// A fixed-window limiter per client IP (behind a proxy, ctx.ip honours TRUST_PROXY). In memory:
// each instance counts on its own, which is enough to stop one address flooding the registry.
import type Koa from "koa";
import { LRUCache } from "lru-cache";
import { OAuthError } from "./errors.ts";

export interface RateLimitOptions {
  /** Requests allowed per address and window. */
  readonly limit: number;
  readonly windowMs: number;
  /** What is counted, for the 429 message ("registrations"). */
  readonly what: string;
}

/** Most addresses counted at once. */
const MAX_TRACKED = 10_000;

export function rateLimit(options: RateLimitOptions): Koa.Middleware {
  // An address's window is forgotten when it ends (ttl, not renewed by use). With more addresses
  // in their window than MAX_TRACKED, the least recently seen goes first: an address that keeps
  // sending stays counted, however many others come and go.
  const windows = new LRUCache<string, { readonly start: number; count: number }>({ max: MAX_TRACKED, ttl: options.windowMs });
  return async (ctx, next) => {
    const now = Date.now();
    let w = windows.get(ctx.ip);
    if (!w) {
      w = { start: now, count: 0 };
      windows.set(ctx.ip, w);
    }
    if (++w.count > options.limit) {
      const retry = Math.max(1, Math.ceil((w.start + options.windowMs - now) / 1000));
      throw new OAuthError("invalid_request", `Too many ${options.what} from this address; retry in ${retry} s.`, {
        status: 429,
        headers: { "Retry-After": String(retry) },
      });
    }
    await next();
  };
}
