// The SQLite hot store's writer: a group that finds another process's lock goes to the writer
// thread, which waits for it while the event loop keeps serving; writes take turns with Prisma's
// transactions of the same process; a crash of the thread loses no acknowledged write, fails the
// writes in flight as "unavailable" (503, retry) and the next group that needs it starts a new
// one; closing commits what is queued and leaves nothing running.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import Database from "libsql";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { openDatabase, type Database as BrokerDatabase } from "../../src/store/db.ts";
import { createSqliteHotStore } from "../../src/store/hot-store-sqlite.ts";
import { isDatabaseUnavailable, StoreWriterUnavailable } from "../../src/store/errors.ts";
import { copyMigratedSqlite } from "../support/template-db.ts";
import { holdWriteLock } from "../support/sqlite-lock.ts";

const T0 = new Date("2031-05-06T07:08:09.123Z");
const session = (sessionHash: string) => ({ sessionHash, owner: "github:1", createdAt: T0 });

describe("the SQLite hot store's writer", () => {
  let dir: string;
  let file: string;
  let database: BrokerDatabase;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-writer-"));
    file = path.join(dir, "broker.db");
    await copyMigratedSqlite(file);
    database = await openDatabase(`file:${file}`);
  });

  afterAll(async () => {
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const owners = async (prefix: string) =>
    (await database.db.mcpSession.findMany({ where: { sessionHash: { startsWith: prefix } }, orderBy: { sessionHash: "asc" } })).map((s) => s.sessionHash);

  it("waits for another process's lock off the event loop, and Prisma's writes wait their turn without blocking it", async () => {
    const { db, hot } = database;
    const { released } = await holdWriteLock(file, 1500);
    let timerFired = false;
    const timer = setTimeout(() => {
      timerFired = true;
    }, 50);
    const hotClaim = hot.claimMcpSession(session("lock-1")).then((owner) => ({ owner, timerFired }));
    // The group is on its way to the writer thread, which holds the gate while it waits.
    await new Promise((resolve) => setImmediate(resolve));
    const prismaWrite = db.mcpSession.create({ data: session("lock-2") }).then(() => timerFired);
    const claimed = await hotClaim;
    const timerFiredBeforePrisma = await prismaWrite;
    clearTimeout(timer);
    await released;
    expect(claimed.owner).toBe("github:1");
    // The timer fell due while both waited for the lock: the event loop was free. (Had either
    // waited in SQLite's busy handler on this thread, it would have resolved first, in the turn
    // that unblocked it.)
    expect(claimed.timerFired).toBe(true);
    expect(timerFiredBeforePrisma).toBe(true);
    expect(await owners("lock-")).toEqual(["lock-1", "lock-2"]);
  });

  it("takes turns with Prisma's transactions of this process: every write lands, none fails busy", async () => {
    const { db, hot } = database;
    const work = Array.from({ length: 20 }, (_, i) =>
      i % 2 === 0
        ? db.$transaction(async (tx) => {
            await tx.mcpSession.create({ data: session(`turns-p${String(i).padStart(2, "0")}`) });
            // Held across event-loop turns, as a cold path's transaction is.
            await new Promise((resolve) => setImmediate(resolve));
            await tx.mcpSession.count();
          })
        : hot.claimMcpSession(session(`turns-h${String(i).padStart(2, "0")}`)),
    );
    await Promise.all(work);
    expect(await owners("turns-")).toHaveLength(20);
  });

  it("after a crash of the writer thread: acknowledged writes stay, writes in flight fail as unavailable, the next wait starts a new thread", async () => {
    const hot = createSqliteHotStore(file);
    try {
      await Promise.all(["crash-a1", "crash-a2", "crash-a3"].map((h) => hot.claimMcpSession(session(h))));
      // Committed on the event loop: no thread was needed.
      expect(hot.stats.threadsStarted).toBe(0);

      // The group finds this lock taken and goes to the writer thread, which waits for it while
      // the thread is ended under it.
      const lock = new Database(file);
      lock.exec("BEGIN IMMEDIATE");
      const inFlight = ["crash-f1", "crash-f2", "crash-f3"].map((h) => hot.claimMcpSession(session(h)));
      const outcomes = Promise.allSettled(inFlight);
      await new Promise((resolve) => setImmediate(resolve));
      expect(hot.stats.threadsStarted).toBe(1);
      const crashed = hot.crashWriterForTest();
      lock.exec("ROLLBACK");
      await crashed;

      for (const outcome of await outcomes) {
        expect(outcome.status).toBe("rejected");
        const reason = (outcome as PromiseRejectedResult).reason;
        expect(reason).toBeInstanceOf(StoreWriterUnavailable);
        expect(isDatabaseUnavailable(reason)).toBe(true);
      }
      expect(await owners("crash-a")).toEqual(["crash-a1", "crash-a2", "crash-a3"]);
      // The group in flight committed whole or not at all.
      expect([0, 3]).toContain((await owners("crash-f")).length);

      // The crashed thread's connection is gone with it: the lock is free, the event loop commits.
      expect(await hot.claimMcpSession(session("crash-n1"))).toBe("github:1");
      expect(hot.stats.threadsStarted).toBe(1);
      // A lock taken again: a new thread waits for it and commits once it is released.
      lock.exec("BEGIN IMMEDIATE");
      const waiting = hot.claimMcpSession(session("crash-n2"));
      await new Promise((resolve) => setImmediate(resolve));
      lock.exec("ROLLBACK");
      lock.close();
      expect(await waiting).toBe("github:1");
      expect(hot.stats.threadsStarted).toBe(2);
      expect(hot.stats.onThread).toBe(1);
      expect(await owners("crash-n")).toEqual(["crash-n1", "crash-n2"]);
    } finally {
      await hot.close();
    }
  });

  it("fails the writes queued behind a group that waited out another process's lock, instead of each waiting again", async () => {
    const hot = createSqliteHotStore(file);
    try {
      // Held past the writer's busy_timeout (5 s): the first group fails with SQLITE_BUSY.
      const { released } = await holdWriteLock(file, 7000);
      const first = hot.claimMcpSession(session("queued-1"));
      // The first group is on its way to the writer thread: the next write queues behind it.
      await new Promise((resolve) => setImmediate(resolve));
      const second = hot.claimMcpSession(session("queued-2"));
      const outcomes = await Promise.allSettled([first, second]);
      await released;
      for (const outcome of outcomes) {
        expect(outcome.status).toBe("rejected");
        expect(isDatabaseUnavailable((outcome as PromiseRejectedResult).reason)).toBe(true);
      }
      // One group reached the thread and waited; the queued write failed with it, never sent.
      expect(hot.stats.commits).toBe(1);
      expect(hot.stats.writes).toBe(1);
    } finally {
      await hot.close();
    }
  }, 20_000);

  it("fails a write whose arguments cannot be stored alone, before it is committed; the writes beside it commit", async () => {
    const hot = createSqliteHotStore(file);
    try {
      const invalid = hot.claimMcpSession({ sessionHash: "encode-bad", owner: "github:1", createdAt: new Date(Number.NaN) });
      const beside = hot.claimMcpSession(session("encode-ok"));
      await expect(invalid).rejects.toThrow(RangeError);
      expect(await beside).toBe("github:1");
      expect(await owners("encode-")).toEqual(["encode-ok"]);
      expect(hot.stats.writes).toBe(1);
    } finally {
      await hot.close();
    }
  });

  it("commits what is queued when closed, then refuses writes as unavailable", async () => {
    const hot = createSqliteHotStore(file);
    const queued = ["close-1", "close-2"].map((h) => hot.claimMcpSession(session(h)));
    await hot.close();
    expect(await Promise.all(queued)).toEqual(["github:1", "github:1"]);
    expect(await owners("close-")).toEqual(["close-1", "close-2"]);
    await expect(hot.claimMcpSession(session("close-3"))).rejects.toBeInstanceOf(StoreWriterUnavailable);
  });
});
