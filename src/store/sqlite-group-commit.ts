// Group commit for SQLite: the writes requested during one event-loop turn run in one transaction
// (one fsync of the WAL for all of them instead of one each); a write that fails takes back only
// its own changes. No caller hears back before COMMIT returned: an answer sent is an answer stored.
import type Database from "libsql";
import type { SqliteWriteGate } from "./sqlite-write-gate.ts";

type Connection = Database.Database;

interface PendingWrite {
  readonly run: (db: Connection) => unknown;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

export class GroupCommit {
  #queue: PendingWrite[] = [];
  #scheduled = false;
  /** Transactions committed and writes in them, for the benchmark and tests. */
  readonly stats = { commits: 0, writes: 0 };

  constructor(
    private readonly connection: () => Connection,
    private readonly gate: SqliteWriteGate,
    /** Called with a failed write's error (to drop a connection SQLite opened read-only, say). */
    private readonly onError: (err: unknown) => void = () => undefined,
  ) {}

  /** Runs `run` inside the next group transaction; resolves with its result once that transaction committed. */
  write<T>(run: (db: Connection) => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (this.#scheduled) return;
      this.#scheduled = true;
      // After this turn's I/O callbacks: every request read in this turn has queued its write.
      setImmediate(() => {
        this.#scheduled = false;
        this.gate.runWhenFree(() => this.#commitQueued());
      });
    });
  }

  /** Commits what is queued now (when the gate is free) and resolves after. */
  drain(): Promise<void> {
    return new Promise((resolve) =>
      this.gate.runWhenFree(() => {
        this.#commitQueued();
        resolve();
      }),
    );
  }

  #commitQueued(): void {
    const writes = this.#queue;
    if (writes.length === 0) return;
    this.#queue = [];
    let db: Connection;
    try {
      db = this.connection();
    } catch (err) {
      this.#failAll(writes, err);
      return;
    }
    // All together first; a write that throws (rare: a broken row, a failing disk) sends the group
    // back to one transaction per write, so that it fails alone. Savepoints would have cost two
    // statements per write on every group instead. When BEGIN or COMMIT fails (the lock stayed
    // taken past busy_timeout, the disk failed), every write fails at once: retrying each would
    // wait out busy_timeout once per write.
    let values: unknown[];
    let writeFailed = false;
    try {
      values = this.#transaction(db, () =>
        writes.map((write) => {
          try {
            return write.run(db);
          } catch (err) {
            writeFailed = true;
            throw err;
          }
        }),
      );
    } catch (err) {
      if (!writeFailed || writes.length === 1) {
        this.#failAll(writes, err);
        return;
      }
      for (const write of writes) this.#one(write);
      return;
    }
    this.stats.commits++;
    this.stats.writes += writes.length;
    for (const [i, write] of writes.entries()) write.resolve(values[i]);
  }

  #one(write: PendingWrite): void {
    let value: unknown;
    try {
      const db = this.connection();
      value = this.#transaction(db, () => write.run(db));
    } catch (err) {
      this.#failAll([write], err);
      return;
    }
    this.stats.commits++;
    this.stats.writes++;
    write.resolve(value);
  }

  /** BEGIN IMMEDIATE, `work`, COMMIT; ROLLBACK when anything throws. */
  #transaction<T>(db: Connection, work: () => T): T {
    db.exec("BEGIN IMMEDIATE");
    try {
      const value = work();
      db.exec("COMMIT");
      return value;
    } catch (err) {
      if (db.inTransaction) {
        try {
          db.exec("ROLLBACK");
        } catch {
          // The connection is beyond use; the next write reopens it (onError).
        }
      }
      throw err;
    }
  }

  #failAll(writes: readonly PendingWrite[], err: unknown): void {
    this.onError(err);
    for (const write of writes) write.reject(err);
  }
}
