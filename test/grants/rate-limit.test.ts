// The per-address rate limiter and its one statement (store/rate-buckets.ts), on freshly migrated
// SQLite and PostgreSQL databases, on an injected clock (no sleeps): a token bucket's semantics,
// one budget for every database handle (instance) sharing the database, what a row holds, and a
// fault refused with a clear OAuth error.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import pino from "pino";
import { openDatabase, type Database } from "../../src/store/db.ts";
import { createRateBuckets } from "../../src/store/rate-buckets.ts";
import { RateLimiter, REGISTRATION_RATE_LIMIT, type RateLimitRule } from "../../src/grants/rate-limit.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { StorageUnavailable } from "../../src/grants/errors.ts";
import { databaseTargets } from "../support/database-targets.ts";

const silent = pino({ level: "silent" });
let addresses = 0;
/** An address no other test used: each test starts from a full bucket. */
const freshAddress = () => `192.0.2.${++addresses}`;

describe.each(databaseTargets("rate limit tests"))("the rate limiter on $name", (target) => {
  let database: Database;
  let url: string;
  let cleanup: () => Promise<void>;
  const hashKey = randomBytes(32);
  const clock = new ManualClock(new Date("2031-01-01T00:00:00Z"));

  beforeAll(async () => {
    const setup = await target.setup();
    ({ url, cleanup } = setup);
    database = await openDatabase(url);
  });
  afterAll(async () => {
    await database.close();
    await cleanup();
  });

  const limiter = (rule: Partial<RateLimitRule> = {}, db: Database = database) =>
    new RateLimiter(createRateBuckets(db.db), { limit: 2, windowMs: 60_000, ...rule }, { purpose: "register", hashKey, clock, logger: silent });
  /** "ok" when let through, else the seconds it says to wait. */
  const take = async (l: RateLimiter, address: string): Promise<"ok" | number> => {
    const decision = await l.take(address);
    return decision.allowed ? "ok" : decision.retryAfterSeconds;
  };
  const times = async (n: number, f: () => Promise<"ok" | number>) => {
    const out: Array<"ok" | number> = [];
    for (let i = 0; i < n; i++) out.push(await f());
    return out;
  };

  it("lets a full bucket through at once, then refuses with when to retry; other addresses are not affected", async () => {
    const l = limiter();
    const address = freshAddress();
    // One request back every 30 s at 2 a minute.
    expect(await times(3, () => take(l, address))).toEqual(["ok", "ok", 30]);
    expect(await take(l, freshAddress())).toBe("ok");
  });

  it("refills at `limit` per window: one request back per share of the window, never more than the burst", async () => {
    const l = limiter({ limit: 60, burst: 10 });
    const address = freshAddress();
    expect(await times(11, () => take(l, address))).toEqual([...Array(10).fill("ok"), 1]);
    clock.advance(999);
    expect(await take(l, address)).toBe(1);
    clock.advance(1);
    expect(await times(2, () => take(l, address))).toEqual(["ok", 1]);
    // A long pause fills the bucket to the burst, not beyond.
    clock.advance(10 * 60_000);
    expect(await times(11, () => take(l, address))).toEqual([...Array(10).fill("ok"), 1]);
  });

  it("a sustained sender gets `limit` per window, whatever it tries", async () => {
    const l = limiter({ limit: 60, burst: 60 });
    const address = freshAddress();
    let passed = 0;
    // Ten requests a second for half a minute: the full bucket, then one a second.
    for (let i = 0; i < 300; i++) {
      if ((await take(l, address)) === "ok") passed++;
      clock.advance(100);
    }
    expect(passed).toBeGreaterThanOrEqual(60 + 30 - 1);
    expect(passed).toBeLessThanOrEqual(60 + 30 + 1);
  });

  it("takes a shared egress's burst at /register's limit: claude.ai registers twice per attempt (anthropics/claude-ai-mcp#966)", async () => {
    const l = limiter(REGISTRATION_RATE_LIMIT);
    const address = freshAddress();
    // 25 people connecting from one address within the same moment: 50 registrations.
    expect(new Set(await times(50, () => take(l, address)))).toEqual(new Set(["ok"]));
  });

  it("two instances (database handles) taking at once share one budget: exactly the burst gets through", async () => {
    const other = await openDatabase(url);
    try {
      const [mine, theirs] = [limiter({ limit: 60, burst: 25 }), limiter({ limit: 60, burst: 25 }, other)];
      const address = freshAddress();
      const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => take(i % 2 ? mine : theirs, address)));
      expect(answers.filter((a) => a === "ok")).toHaveLength(25);
    } finally {
      await other.close();
    }
  });

  it("stores no address, only a keyed hash, and when the bucket is full again", async () => {
    const l = limiter({ limit: 60, burst: 5 });
    const address = freshAddress();
    // The earlier tests' buckets go first: this one is then the only row.
    await database.db.rateLimitBucket.deleteMany({});
    expect(await times(3, () => take(l, address))).toEqual(["ok", "ok", "ok"]);
    const [row, ...more] = await database.db.rateLimitBucket.findMany();
    expect(more).toEqual([]);
    expect(row!.key).toMatch(/^register:[A-Za-z0-9_-]{43}$/);
    expect(row!.key).not.toContain(address);
    // Three tokens short: full again 3 s from now, which is when the sweep may remove it
    // (test/oauth/registration-limit.test.ts runs the sweep).
    expect(row!.fullAt).toBe(clock.now() + 3000);
    // Then it is full: the whole burst, not more.
    clock.advance(3000);
    expect(await times(6, () => take(l, address))).toEqual([...Array(5).fill("ok"), 1]);
  });

  it("a database fault while counting is refused with temporarily_unavailable and Retry-After, not let through", async () => {
    const lines: Array<{ level: number; msg: string; err?: string }> = [];
    const logger = pino({ level: "warn" }, { write: (line: string) => void lines.push(JSON.parse(line) as { level: number; msg: string }) });
    const l = new RateLimiter(createRateBuckets(database.db), { limit: 2, windowMs: 60_000 }, { purpose: "register", hashKey, clock, logger });
    // The statement fails in the database (its table is gone for a moment).
    await database.db.$executeRawUnsafe('ALTER TABLE "RateLimitBucket" RENAME TO "RateLimitBucketAway"');
    try {
      const refused = await l.take(freshAddress()).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(StorageUnavailable);
      expect(refused).toMatchObject({ code: "temporarily_unavailable", retryAfterSeconds: 5 });
    } finally {
      await database.db.$executeRawUnsafe('ALTER TABLE "RateLimitBucketAway" RENAME TO "RateLimitBucket"');
    }
    expect(lines).toEqual([expect.objectContaining({ level: 40, msg: expect.stringMatching(/rate limit could not be counted/), err: expect.any(String) })]);
    expect(lines[0]!.err).not.toContain("\n");
    expect(await l.take(freshAddress())).toEqual({ allowed: true });
  });
});
