// A token bucket per client IP (behind a proxy, ctx.ip honours TRUST_PROXY). In memory: each
// instance counts on its own, which is enough to stop one address flooding the registry.
//
// A bucket, not a fixed window: many people behind one shared egress address (a company NAT, or a
// hosted client such as claude.ai, which registers twice per connection attempt:
// anthropics/claude-ai-mcp#966) arrive in bursts, which a bucket of `burst` absorbs, while a
// sustained flood gets no more than `limit` per `windowMs`.
import type Koa from "koa";
import { LRUCache } from "lru-cache";
import { OAuthError } from "./errors.ts";

export interface RateLimitOptions {
  /** Requests allowed per address and window, sustained (the bucket refills at this rate). */
  readonly limit: number;
  readonly windowMs: number;
  /** The bucket's size: how many requests an address with a full bucket may send at once. Default `limit`. */
  readonly burst?: number;
  /** What is counted, for the 429 message ("registrations"). */
  readonly what: string;
  /** The time in milliseconds (tests move it); default Date.now. */
  readonly now?: () => number;
}

/** Most addresses counted at once. */
const MAX_TRACKED = 10_000;

export function rateLimit(options: RateLimitOptions): Koa.Middleware {
  const burst = options.burst ?? options.limit;
  const perMs = options.limit / options.windowMs;
  const now = options.now ?? Date.now;
  // An address's bucket is forgotten once it would be full again (ttl from its last request): a
  // forgotten address starts with a full bucket, which is what it would have. With more addresses
  // than MAX_TRACKED, the least recently seen goes first: an address that keeps sending stays
  // counted, however many others come and go.
  const buckets = new LRUCache<string, { tokens: number; at: number }>({
    max: MAX_TRACKED,
    ttl: Math.ceil(burst / perMs),
    ttlAutopurge: false,
    perf: { now },
  });
  return async (ctx, next) => {
    const t = now();
    const bucket = buckets.get(ctx.ip) ?? { tokens: burst, at: t };
    bucket.tokens = Math.min(burst, bucket.tokens + (t - bucket.at) * perMs);
    bucket.at = t;
    if (bucket.tokens < 1) {
      buckets.set(ctx.ip, bucket);
      const retry = Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000));
      throw new OAuthError("invalid_request", `Too many ${options.what} from this address; retry in ${retry} s.`, {
        status: 429,
        headers: { "Retry-After": String(retry) },
      });
    }
    bucket.tokens -= 1;
    buckets.set(ctx.ip, bucket);
    await next();
  };
}
