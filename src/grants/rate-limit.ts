// Per-address rate limits, counted in the database (store/rate-buckets.ts) so that every instance
// sharing it shares the budget: N brokers behind a load balancer give an address the same budget as
// one broker, not N times it.
//
// A token bucket, not a fixed window: many people behind one shared egress address (a company NAT,
// or a hosted client such as claude.ai, which registers twice per connection attempt:
// anthropics/claude-ai-mcp#966) arrive in bursts, which a bucket of `burst` absorbs, while a
// sustained flood gets no more than `limit` per `windowMs`.
//
// A database fault while counting refuses the request with 503 temporarily_unavailable (Retry-After)
// rather than letting it through uncounted. The count lives in the database the registration is
// about to write: when the count fails, the registration itself would most likely fail too, so
// failing open would seldom help a client — while in a partial fault (a SQLite file locked past
// busy_timeout, PostgreSQL out of connection slots) it would let a flood through exactly when the
// database can least take it, and with no limit at all. The client gets a clear, retryable OAuth
// error either way, never a 500; the operator gets a warning with the cause.
import { createHmac } from "node:crypto";
import type { Logger } from "../logger.ts";
import { firstLine } from "../lib/error-text.ts";
import type { BucketRule, RateBuckets } from "../store/rate-buckets.ts";
import type { Clock } from "../lib/clock.ts";
import { StorageUnavailable } from "./errors.ts";

export interface RateLimitRule {
  /** Requests allowed per address and window, sustained (the bucket refills at this rate). */
  readonly limit: number;
  readonly windowMs: number;
  /** The bucket's size: how many requests an address with a full bucket may send at once. Default `limit`. */
  readonly burst?: number;
}

/**
 * Dynamic registrations per client address: 60 a minute sustained, up to 60 at once. claude.ai
 * registers twice per connection attempt from shared egress addresses (anthropics/claude-ai-mcp#966):
 * 30 people connecting in the same minute from one such address still get through.
 */
export const REGISTRATION_RATE_LIMIT = { limit: 60, windowMs: 60_000, burst: 60 } as const satisfies RateLimitRule;

export type RateDecision = { readonly allowed: true } | { readonly allowed: false; readonly retryAfterSeconds: number };

export interface RateLimiterOptions {
  /** What is limited: the prefix of the bucket keys ("register"), and the warning's subject. */
  readonly purpose: string;
  /** Keys the address hash (HMAC), so the table holds no address and none can be guessed back. */
  readonly hashKey: Uint8Array;
  readonly clock: Clock;
  readonly logger: Logger;
}

export class RateLimiter {
  readonly #bucket: BucketRule;
  /**
   * Seconds until a refused address certainly has a token again. A refusal reads nothing back (it
   * writes nothing, store/rate-buckets.ts), but an address is refused only while it lacks at most
   * one token's worth of time: one interval bounds the wait.
   */
  readonly #retryAfterSeconds: number;

  constructor(
    private readonly buckets: RateBuckets,
    rule: RateLimitRule,
    private readonly options: RateLimiterOptions,
  ) {
    const burst = rule.burst ?? rule.limit;
    if (!(rule.limit > 0 && rule.windowMs > 0 && burst >= 1)) throw new RangeError("a rate limit needs limit > 0, windowMs > 0 and burst ≥ 1");
    this.#bucket = { intervalMs: rule.windowMs / rule.limit, burst };
    this.#retryAfterSeconds = Math.max(1, Math.ceil(this.#bucket.intervalMs / 1000));
  }

  /** Counts one request from `address`: allowed, or refused with when to retry. */
  async take(address: string): Promise<RateDecision> {
    const key = `${this.options.purpose}:${createHmac("sha256", this.options.hashKey).update(address).digest("base64url")}`;
    let taken: boolean;
    try {
      taken = await this.buckets.take(key, this.#bucket, this.options.clock.now());
    } catch (err) {
      // Why refuse rather than let through: see the top of this file.
      this.options.logger.warn({ err: firstLine(err), purpose: this.options.purpose }, "rate limit could not be counted: request refused with 503");
      throw new StorageUnavailable("The service cannot use its database right now to count requests. Please try again in a few seconds.");
    }
    return taken ? { allowed: true } : { allowed: false, retryAfterSeconds: this.#retryAfterSeconds };
  }
}
