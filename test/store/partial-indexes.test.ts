// The index the revocation feed reads is partial: it holds revoked access tokens only, so the
// access token every refresh and code exchange inserts (revokedAt null) writes no entry into it.
// Prisma 6 cannot spell an index's WHERE, so the predicate lives in a hand-written migration; a
// later migration generated from the schema would recreate the index whole, and this test fails.
// Both readers of the index (the feed's hot statement and the sweep's deletion of long-revoked
// tokens) must still be answered through it: each asks for revokedAt after or before a time, which
// implies the predicate, and the plans below show each database proving it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import Database from "libsql";
import pg from "pg";
import { SQL as postgresSql } from "../../src/store/hot-store-postgres.ts";
import { SQL as sqliteSql } from "../../src/store/sqlite-hot-sql.ts";
import { databaseTargets } from "../support/database-targets.ts";

const INDEX = "AccessToken_revokedAt_idx";

/** What the sweep asks of the table (src/grants/sweep.ts), in each database's parameter style. */
const sweepQuery = (p1: string, p2: string) => `SELECT "id" FROM "AccessToken" WHERE "expiresAt" < ${p1} OR "revokedAt" < ${p2}`;

interface Inspector {
  /** The index's definition as the database keeps it. */
  definition(): Promise<string>;
  /** The plan of a statement, as one text. */
  plan(sql: string, params: readonly string[]): Promise<string>;
  close(): Promise<void>;
}

function sqliteInspector(url: string): Inspector {
  const db = new Database(url.replace(/^file:/, ""));
  return {
    definition: async () => (db.prepare(`SELECT "sql" FROM "sqlite_master" WHERE "name" = ?`).get(INDEX) as { sql: string }).sql,
    plan: async (sql, params) => (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as { detail: string }[]).map((r) => r.detail).join("\n"),
    close: async () => {
      db.close();
    },
  };
}

async function postgresInspector(url: string): Promise<Inspector> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  // An empty table is read whole whatever its indexes; with sequential scans priced out of reach,
  // the planner takes an index whenever it may, so the plan shows whether it may.
  await client.query("SET enable_seqscan = off");
  return {
    definition: async () => (await client.query<{ indexdef: string }>("SELECT indexdef FROM pg_indexes WHERE indexname = $1", [INDEX])).rows[0]!.indexdef,
    plan: async (sql, params) => (await client.query<{ "QUERY PLAN": string }>(`EXPLAIN ${sql}`, [...params])).rows.map((r) => r["QUERY PLAN"]).join("\n"),
    close: () => client.end(),
  };
}

describe.each(databaseTargets("partial index tests"))("the revocation feed's index on $name", (target) => {
  let inspector: Inspector;
  let cleanup: () => Promise<void>;
  const at = "2026-11-28T12:00:00.000+00:00";

  beforeAll(async () => {
    const setup = await target.setup();
    cleanup = setup.cleanup;
    inspector = target.name === "sqlite" ? sqliteInspector(setup.url) : await postgresInspector(setup.url);
  });

  afterAll(async () => {
    await inspector.close();
    await cleanup();
  });

  it("holds only revoked tokens: its definition keeps the predicate after every migration", async () => {
    expect(await inspector.definition()).toMatch(/WHERE \(?"revokedAt" IS NOT NULL\)?$/);
  });

  it("still answers the feed's hot statement", async () => {
    const sql = target.name === "sqlite" ? sqliteSql.revokedTokens : postgresSql.revokedTokens;
    expect(await inspector.plan(sql, [at])).toContain(INDEX);
  });

  it("still answers the sweep's search for long-revoked tokens", async () => {
    const sql = target.name === "sqlite" ? sweepQuery("?", "?") : sweepQuery("$1::timestamp(3)", "$2::timestamp(3)");
    expect(await inspector.plan(sql, [at, at])).toContain(INDEX);
  });
});
