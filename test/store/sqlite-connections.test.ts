// Every SQLite connection the broker uses carries its settings; so a write lock held for a moment by
// another process (the CLI) makes a write wait instead of failing. Prisma's transactions run on the
// client's own connection: none is left open behind them, and one that fails at COMMIT leaves
// nothing open for the statements after it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, readdirSync, readlinkSync, rmSync } from "node:fs";
import Libsql from "libsql";
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
    expect(await settings(db)).toEqual(expected);
    const inside = await db.$transaction(async (tx) => settings(tx));
    expect(inside).toEqual(expected);
    expect(await settings(db)).toEqual(expected);
  });

  it("leaves no connection open behind a transaction", async () => {
    const { db } = database;
    /** File descriptors this process holds on the database file and its WAL. */
    const descriptors = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`).startsWith(file);
        } catch {
          return false;
        }
      }).length;
    await db.$transaction(async (tx) => tx.$queryRawUnsafe("SELECT 1"));
    const before = descriptors();
    for (let i = 0; i < 200; i++) await db.$transaction(async (tx) => tx.$queryRawUnsafe("SELECT 1"));
    // @libsql/client's own transactions left a connection (two descriptors) each for the GC.
    expect(descriptors()).toBe(before);
  });

  it("rolls back a transaction whose COMMIT fails, so that the statements after it commit on their own", async () => {
    const { db } = database;
    await db.$executeRawUnsafe("CREATE TABLE parent (id INTEGER PRIMARY KEY)");
    await db.$executeRawUnsafe("CREATE TABLE child (parentId INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)");
    // A deferred foreign key is checked at COMMIT: the COMMIT itself fails.
    const failed = await db.$transaction(async (tx) => tx.$executeRawUnsafe("INSERT INTO child (parentId) VALUES (42)")).catch((err: unknown) => err);
    expect(String((failed as Error).message)).toMatch(/FOREIGN KEY/i);
    // The next transaction waits for another process's lock as any does (libsql left the failed
    // COMMIT's statement active on its connection, and SQLite then answered SQLITE_BUSY at once).
    const { released } = await holdWriteLock(file, 300);
    await db.$transaction(async (tx) => tx.$executeRawUnsafe("INSERT INTO parent (id) VALUES (7)"));
    await released;
    await db.$executeRawUnsafe("INSERT INTO parent (id) VALUES (8)");
    // Seen by another connection: committed, not held in a transaction left open.
    const other = new Libsql(file);
    try {
      expect(other.prepare("SELECT count(*) AS n FROM parent").get()).toEqual({ n: 2 });
      expect(other.prepare("SELECT count(*) AS n FROM child").get()).toEqual({ n: 0 });
    } finally {
      other.close();
    }
  });

  it("gives the hot store's writer thread the same settings, and its event-loop connection its own", async () => {
    const hot = createSqliteHotStore(file);
    try {
      expect(await hot.connectionSettings()).toEqual({
        // Nothing waits for a lock or the disk on the event loop, and checkpoints run on the writer
        // thread: test/store/wal-flush.test.ts shows that nothing is answered before it is on disk.
        reader: { ...expected, busyTimeout: 0, synchronous: 1, walAutocheckpoint: 0 },
        writer: { ...expected, walAutocheckpoint: 1000 },
      });
    } finally {
      await hot.close();
    }
  });

  it("waits for a write lock another process holds for 1.5 s, then commits", async () => {
    const { db } = database;
    // A transaction first: @libsql/client's own would have left the next one a new connection (where
    // the settings were once missing).
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
