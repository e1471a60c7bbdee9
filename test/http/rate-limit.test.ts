// The per-address limiter of /register: a token bucket per address, in bounded memory, on an
// injected clock (no sleeps).
import { describe, expect, it } from "@jest/globals";
import type Koa from "koa";
import { rateLimit, type RateLimitOptions } from "../../src/http/rate-limit.ts";
import { REGISTRATION_RATE_LIMIT } from "../../src/oauth/router.ts";

function limiter(options: Partial<RateLimitOptions> = {}) {
  const clock = { now: 1_000_000 };
  const middleware = rateLimit({ limit: 2, windowMs: 60_000, what: "registrations", now: () => clock.now, ...options });
  /** The status one request from `ip` gets: 200 when let through, else the error's. */
  const request = async (ip: string): Promise<number> => {
    try {
      await middleware({ ip } as Koa.Context, async () => undefined);
      return 200;
    } catch (err) {
      return (err as { status: number }).status;
    }
  };
  return { request, middleware, clock };
}

const times = async (n: number, f: () => Promise<number>): Promise<number[]> => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(await f());
  return out;
};

describe("rateLimit", () => {
  it("lets a full bucket through at once, then answers 429 with Retry-After", async () => {
    const { middleware } = limiter();
    const ctx = { ip: "192.0.2.1" } as Koa.Context;
    const next = async () => undefined;
    await middleware(ctx, next);
    await middleware(ctx, next);
    await expect(middleware(ctx, next)).rejects.toMatchObject({
      status: 429,
      // One request back every 30 s at 2 a minute.
      headers: { "Retry-After": "30" },
      description: expect.stringMatching(/Too many registrations/),
    });
    await expect(middleware({ ip: "192.0.2.2" } as Koa.Context, next)).resolves.toBeUndefined();
  });

  it("refills at `limit` per window: one request back per share of the window, never more than the burst", async () => {
    const { request, clock } = limiter({ limit: 60, burst: 10 });
    expect(await times(11, () => request("192.0.2.1"))).toEqual([...Array(10).fill(200), 429]);
    clock.now += 999;
    expect(await request("192.0.2.1")).toBe(429);
    clock.now += 1;
    expect(await times(2, () => request("192.0.2.1"))).toEqual([200, 429]);
    // A long pause fills the bucket to the burst, not beyond.
    clock.now += 10 * 60_000;
    expect(await times(11, () => request("192.0.2.1"))).toEqual([...Array(10).fill(200), 429]);
  });

  it("a sustained sender gets `limit` per window, whatever it tries", async () => {
    const { request, clock } = limiter({ limit: 60, burst: 60 });
    let passed = 0;
    // Ten requests a second for five minutes.
    for (let i = 0; i < 3000; i++) {
      if ((await request("192.0.2.9")) === 200) passed++;
      clock.now += 100;
    }
    expect(passed).toBeGreaterThanOrEqual(60 + 5 * 60 - 1);
    expect(passed).toBeLessThanOrEqual(60 + 5 * 60 + 1);
  });

  it("keeps counting an address that keeps sending while more others pass than it remembers (10,000)", async () => {
    const { request } = limiter();
    expect([await request("198.51.100.1"), await request("198.51.100.1")]).toEqual([200, 200]);
    const refused: number[] = [];
    for (let i = 0; i < 12_000; i++) {
      // New addresses fill the memory; the flooder's retries keep it among the recent ones.
      if ((await request(`10.${i >> 8}.${i & 255}.1`)) !== 200) throw new Error(`address ${i} was refused`);
      if (i % 100 === 0) refused.push(await request("198.51.100.1"));
    }
    expect(new Set(refused)).toEqual(new Set([429]));
  });

  it("/register takes a shared egress's burst: claude.ai registers twice per attempt (anthropics/claude-ai-mcp#966)", async () => {
    const { request } = limiter(REGISTRATION_RATE_LIMIT);
    // 25 people connecting from one address within the same second: 50 registrations.
    expect(new Set(await times(50, () => request("203.0.113.7")))).toEqual(new Set([200]));
  });
});
