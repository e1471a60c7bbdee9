// The per-address limiter of /register: a fixed window per address, in bounded memory.
import { describe, expect, it } from "@jest/globals";
import type Koa from "koa";
import { rateLimit, type RateLimitOptions } from "../../src/http/rate-limit.ts";

function limiter(options: Partial<RateLimitOptions> = {}) {
  const middleware = rateLimit({ limit: 2, windowMs: 60_000, what: "registrations", ...options });
  /** The status one request from `ip` gets: 200 when let through, else the error's. */
  return async (ip: string): Promise<number> => {
    try {
      await middleware({ ip } as Koa.Context, async () => undefined);
      return 200;
    } catch (err) {
      return (err as { status: number }).status;
    }
  };
}

describe("rateLimit", () => {
  it("lets `limit` requests per address through in a window, then answers 429 with Retry-After", async () => {
    const middleware = rateLimit({ limit: 2, windowMs: 60_000, what: "registrations" });
    const ctx = { ip: "192.0.2.1" } as Koa.Context;
    const next = async () => undefined;
    await middleware(ctx, next);
    await middleware(ctx, next);
    await expect(middleware(ctx, next)).rejects.toMatchObject({
      status: 429,
      headers: { "Retry-After": "60" },
      description: expect.stringMatching(/Too many registrations/),
    });
    await expect(middleware({ ip: "192.0.2.2" } as Koa.Context, next)).resolves.toBeUndefined();
  });

  it("forgets an address when its window ends", async () => {
    const request = limiter({ windowMs: 50 });
    expect([await request("192.0.2.1"), await request("192.0.2.1"), await request("192.0.2.1")]).toEqual([200, 200, 429]);
    await new Promise((resolve) => setTimeout(resolve, 80));
    expect(await request("192.0.2.1")).toBe(200);
  });

  it("keeps counting an address that keeps sending while more others pass than it remembers (10,000)", async () => {
    const request = limiter();
    expect([await request("198.51.100.1"), await request("198.51.100.1")]).toEqual([200, 200]);
    const refused: number[] = [];
    for (let i = 0; i < 12_000; i++) {
      // New addresses fill the memory; the flooder's retries keep it among the recent ones.
      if ((await request(`10.${i >> 8}.${i & 255}.1`)) !== 200) throw new Error(`address ${i} was refused`);
      if (i % 100 === 0) refused.push(await request("198.51.100.1"));
    }
    expect(new Set(refused)).toEqual(new Set([429]));
  });
});
