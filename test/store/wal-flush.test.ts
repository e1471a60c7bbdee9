// The SQLite hot store commits on the event loop with synchronous=NORMAL and flushes the WAL file
// itself (src/store/wal-flush.ts). Who must not hear of a commit before it is on disk: the writer's
// caller, and anyone who reads what the commit wrote. Here the flush is held open by the test, so
// the order is seen, not timed: a write and a read made after the commit settle only once a flush
// that started after that commit has ended; a failed flush fails its writes as unavailable (503).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { fdatasync, fstatSync, fsync, mkdtempSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "libsql";
import { createSqliteHotStore } from "../../src/store/hot-store-sqlite.ts";
import { isDatabaseUnavailable, sqliteCannotWriteCode, StoreWriterUnavailable } from "../../src/store/errors.ts";
import { FIRST_CHECKPOINT_AFTER_COMMITS } from "../../src/store/sqlite-writer.ts";
import type { FlushFile } from "../../src/store/wal-flush.ts";
import { copyMigratedSqlite } from "../support/template-db.ts";

const T0 = new Date("2031-05-06T07:08:09.123Z");
const session = (sessionHash: string) => ({ sessionHash, owner: "github:1", createdAt: T0 });
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Flushes of the WAL file the test ends: each waits in `held` until the test calls `end` (the folder's sync runs as it would). */
function heldFlushes() {
  const held: Array<{ fd: number; done: (err: NodeJS.ErrnoException | null) => void }> = [];
  const flushFile: FlushFile = (fd, done) => {
    if (fstatSync(fd).isDirectory()) fsync(fd, done);
    else held.push({ fd, done });
  };
  const end = (err: NodeJS.ErrnoException | null = null) => {
    const flush = held.shift();
    if (!flush) throw new Error("no flush is in flight");
    flush.done(err);
  };
  /** Ends what is still held, so that a failed test's store can close (it waits for its flushes). */
  const endAll = () => {
    while (held.length > 0) end();
  };
  return { held, flushFile, end, endAll };
}

/** Whether a promise has settled, without waiting for it. */
function tracked<T>(promise: Promise<T>) {
  const state = { settled: false, promise };
  promise.then(
    () => {
      state.settled = true;
    },
    () => {
      state.settled = true;
    },
  );
  return state;
}

describe("the SQLite hot store's own WAL flush", () => {
  let dir: string;
  let file: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-wal-flush-"));
    file = path.join(dir, "broker.db");
    await copyMigratedSqlite(file);
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  const committedOwner = (sessionHash: string) => {
    const other = new Database(file);
    try {
      return (other.prepare(`SELECT "owner" FROM "McpSession" WHERE "sessionHash" = ?`).get(sessionHash) as { owner: string } | undefined)?.owner;
    } finally {
      other.close();
    }
  };

  it("answers a write, and a read of what it wrote, only once a flush that started after the commit has ended", async () => {
    const flushes = heldFlushes();
    const hot = createSqliteHotStore(file, flushes.flushFile);
    try {
      const write = tracked(hot.claimMcpSession(session("order-1")));
      await nextTurn();
      // Committed (another connection sees it), a flush started, and nobody heard of it yet.
      expect(committedOwner("order-1")).toBe("github:1");
      expect(flushes.held).toHaveLength(1);
      const read = tracked(hot.mcpSessionOwner("order-1"));
      await nextTurn();
      expect(write.settled).toBe(false);
      expect(read.settled).toBe(false);

      flushes.end();
      expect(await write.promise).toBe("github:1");
      expect(await read.promise).toBe("github:1");
      // With nothing left to flush, a read answers at once, without a flush.
      expect(await hot.mcpSessionOwner("order-1")).toBe("github:1");
      expect(flushes.held).toHaveLength(0);
      expect(hot.stats.flushes).toBe(1);
    } finally {
      flushes.endAll();
      await hot.close();
    }
  });

  it("covers the commits made during a flush with the next one, not one flush each", async () => {
    const flushes = heldFlushes();
    const hot = createSqliteHotStore(file, flushes.flushFile);
    try {
      const first = tracked(hot.claimMcpSession(session("batch-1")));
      await nextTurn();
      expect(flushes.held).toHaveLength(1);
      // Three more groups commit, each in its own turn, while the first flush is in flight.
      const later = [];
      for (const h of ["batch-2", "batch-3", "batch-4"]) {
        later.push(tracked(hot.claimMcpSession(session(h))));
        await nextTurn();
      }
      expect(hot.stats.commits).toBe(4);
      expect(flushes.held).toHaveLength(1);

      flushes.end();
      await first.promise;
      await nextTurn();
      // The first flush started before they committed: it does not cover them.
      expect(later.map((w) => w.settled)).toEqual([false, false, false]);
      expect(flushes.held).toHaveLength(1);

      flushes.end();
      expect(await Promise.all(later.map((w) => w.promise))).toEqual(["github:1", "github:1", "github:1"]);
      expect(hot.stats.flushes).toBe(2);
    } finally {
      flushes.endAll();
      await hot.close();
    }
  });

  it("fails the writes of a flush that failed as unavailable (503, retry), and flushes again for the next commit", async () => {
    const flushes = heldFlushes();
    const hot = createSqliteHotStore(file, flushes.flushFile);
    try {
      const write = hot.claimMcpSession(session("eio-1"));
      const outcome = write.then(
        () => undefined,
        (err: unknown) => err,
      );
      await nextTurn();
      flushes.end(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
      const err = await outcome;
      expect(err).toBeInstanceOf(StoreWriterUnavailable);
      expect(isDatabaseUnavailable(err)).toBe(true);
      expect((err as Error).message).toMatch(/WAL could not be flushed to disk/);
      // As SQLite's own failed fsync would read: /readyz reports a disk I/O error.
      expect(sqliteCannotWriteCode(err)).toBe("SQLITE_IOERR");

      const next = hot.claimMcpSession(session("eio-2"));
      await nextTurn();
      flushes.end();
      expect(await next).toBe("github:1");
    } finally {
      flushes.endAll();
      await hot.close();
    }
  });

  it("flushes the database's own WAL file, and its folder once after opening it (the file may be new)", async () => {
    const flushed: string[] = [];
    const hot = createSqliteHotStore(file, (fd, done) => {
      flushed.push(readlinkSync(`/proc/self/fd/${fd}`));
      fdatasync(fd, done);
    });
    try {
      await hot.claimMcpSession(session("file-1"));
      await hot.claimMcpSession(session("file-2"));
      expect(flushed).toEqual([`${file}-wal`, dir, `${file}-wal`]);
    } finally {
      await hot.close();
    }
  });

  it("leaves checkpoints to the writer thread, spaced by the pages the commits write", async () => {
    const hot = createSqliteHotStore(file);
    try {
      for (let i = 0; i < FIRST_CHECKPOINT_AFTER_COMMITS - 1; i++) await hot.claimMcpSession(session(`ckpt-${i}`));
      // No lock was taken elsewhere and no checkpoint is due: the writer thread never started.
      expect(hot.stats.threadsStarted).toBe(0);
      await hot.claimMcpSession(session("ckpt-last"));
      // The thread answers in order: after the settings, the checkpoint asked for before them is done.
      const { reader, writer } = await hot.connectionSettings();
      expect(hot.stats.threadsStarted).toBe(1);
      expect(hot.stats.checkpoints).toBe(1);
      expect(hot.stats.onThread).toBe(0);
      // A claim writes a few pages: the next checkpoint waits for more commits, until ~1,000 pages.
      expect(hot.stats.checkpointEvery).toBeGreaterThan(FIRST_CHECKPOINT_AFTER_COMMITS);
      expect(reader).toEqual({ busyTimeout: 0, synchronous: 1, foreignKeys: 1, journalMode: "wal", walAutocheckpoint: 0 });
      expect(writer.synchronous).toBe(2);
    } finally {
      await hot.close();
    }
  });
});
