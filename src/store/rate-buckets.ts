// Token buckets of rate limits, counted in the database: every instance sharing it (brokers on one
// PostgreSQL database, processes on one SQLite file) draws on one budget per key.
//
// A bucket is one number, the moment it is full again (`fullAt`, ms since the epoch): at time t it
// holds burst − (fullAt − t) / interval tokens, burst once t ≥ fullAt. So no row is a full bucket,
// and a row past its fullAt means the same as none (sweep.ts removes it).
//
// Taking a token is one UPSERT, atomic on both databases: SQLite's write lock and PostgreSQL's row
// lock on the key serialise concurrent takes, each seeing the one before. A refusal writes nothing
// (the update's WHERE fails, so no row comes back): a flood from one address costs the database a
// lock, not a write. Registration is a cold path, so this goes through Prisma; the statement is
// plain SQL both databases run as it is (CASE rather than MAX/GREATEST, explicit casts for
// PostgreSQL's parameter types), so there is one text, run on both by test/store/rate-buckets.test.ts.
import type { Db } from "./db.ts";

export interface BucketRule {
  /** Milliseconds for one token to come back (the window divided by the sustained limit). */
  readonly intervalMs: number;
  /** Tokens a full bucket holds: how many requests may come at once. At least 1. */
  readonly burst: number;
}

export interface RateBuckets {
  /** Takes one token from `key`'s bucket at `nowMs` if it holds one; true when taken. */
  take(key: string, rule: BucketRule, nowMs: number): Promise<boolean>;
}

export function createRateBuckets(db: Db): RateBuckets {
  return {
    async take(key, { intervalMs, burst }, nowMs) {
      // Taken while the bucket holds ≥ 1 token: fullAt − now ≤ (burst − 1) × interval. Taking moves
      // fullAt one interval later, counted from now when the bucket was already full.
      const slackMs = (burst - 1) * intervalMs;
      const rows = await db.$queryRaw<Array<{ fullAt: number }>>`
        INSERT INTO "RateLimitBucket" ("key", "fullAt")
        VALUES (${key}, CAST(${nowMs} AS DOUBLE PRECISION) + CAST(${intervalMs} AS DOUBLE PRECISION))
        ON CONFLICT ("key") DO UPDATE SET "fullAt" =
          CASE WHEN "RateLimitBucket"."fullAt" > CAST(${nowMs} AS DOUBLE PRECISION) THEN "RateLimitBucket"."fullAt"
            ELSE CAST(${nowMs} AS DOUBLE PRECISION) END + CAST(${intervalMs} AS DOUBLE PRECISION)
        WHERE "RateLimitBucket"."fullAt" - CAST(${nowMs} AS DOUBLE PRECISION) <= CAST(${slackMs} AS DOUBLE PRECISION)
        RETURNING "fullAt"`;
      return rows.length === 1;
    },
  };
}
