// Every SQLite connection the broker uses carries its settings, including the fresh connection
// @libsql/client opens after each interactive transaction; so a write lock held for a moment by
// another process (the CLI) makes a write wait instead of failing.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { openDatabase, type Database, type Db } from "../../src/store/db.ts";
import { holdWriteLock } from "../support/sqlite-lock.ts";
import { createSqliteHotStore } from "../../src/store/hot-store-sqlite.ts";

type Tx = Parameters<Parameters<Db["$transaction"]>[0]>[0];

async function settings(db: Db | Tx) {
  const one = async (pragma: string) => {
    const [row] = await db.$queryRawUnsafe<Array<Record<string, unknown>>>(`PRAGMA ${pragma}`);
    return Number(Object.values(row!)[0]) || Object.values(row!)[0];
  };
  return {
    busyTimeout: await one("busy_timeout"),
    synchronous: await one("synchronous"),
    foreignKeys: await one("foreign_keys"),
    journalMode: await one("journal_mode"),
  };
}

// synchronous 2 = FULL.
const expected = { busyTimeout: 5000, synchronous: 2, foreignKeys: 1, journalMode: "wal" };

describe("SQLite connections", () => {
  let dir: string;
  let file: string;
  let database: Database;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-sqlite-conn-"));
    file = path.join(dir, "broker.db");
    database = await openDatabase(`file:${file}`);
    await database.db.$executeRawUnsafe("CREATE TABLE lock_probe (n INTEGER NOT NULL)");
  });

  afterAll(async () => {
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("keeps busy_timeout, synchronous, foreign_keys and WAL on every connection, across transactions", async () => {
    const { db } = database;
    expect(await settings(db)).toEqual(expected);
    await db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe("INSERT INTO lock_probe (n) VALUES (1)");
    });
    // The client handed its connection to that transaction: this is a new one.
    expect(await settings(db)).toEqual(expected);
    const inside = await db.$transaction(async (tx) => settings(tx));
    expect(inside).toEqual(expected);
    expect(await settings(db)).toEqual(expected);
  });

  it("gives the hot store's own connections (reads here, writes on its writer thread) the same settings", async () => {
    const hot = createSqliteHotStore(file);
    try {
      expect(await hot.connectionSettings()).toEqual({ reader: expected, writer: expected });
    } finally {
      await hot.close();
    }
  });

  it("waits for a write lock another process holds for 1.5 s, then commits", async () => {
    const { db } = database;
    // A transaction first, so the next one runs on a connection opened after it (where the
    // settings used to be missing).
    await db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe("INSERT INTO lock_probe (n) VALUES (2)");
    });
    const { released } = await holdWriteLock(file, 1500);
    const started = performance.now();
    await db.$transaction(async (tx) => {
      await tx.$executeRawUnsafe("INSERT INTO lock_probe (n) VALUES (3)");
    });
    const waitedMs = performance.now() - started;
    await released;
    // It waited for the lock (not failed at once) and got it: busy_timeout did not run out (the
    // transaction would have failed SQLITE_BUSY).
    expect(waitedMs).toBeGreaterThan(1000);
    const rows = await db.$queryRawUnsafe<Array<{ n: bigint }>>("SELECT n FROM lock_probe ORDER BY n");
    expect(rows.map((r) => Number(r.n))).toEqual([1, 2, 3]);
  });
});
