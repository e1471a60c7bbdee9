// Durability for the commits the event-loop thread makes with synchronous=NORMAL (sqlite-writer.ts):
// such a COMMIT writes its WAL frames to the operating system without waiting for the disk, and
// this module then flushes the WAL file (fdatasync, in libuv's thread pool) before anyone hears of
// the commit. One flush runs at a time and covers every commit made before it started; commits made
// meanwhile wait for the next one, so a burst of groups costs one or two flushes, not one each.
//
// Why not synchronous=FULL: its fsync runs inside COMMIT, on the thread that commits; on the event
// loop every request would wait for the disk. Why this is as durable: fdatasync flushes every
// written page of the file, whichever descriptor wrote it, and a WAL commit is whole once its frames
// are on disk. SQLite holds no lock on the -wal file (its locks are on the database and -shm files),
// so this descriptor cannot release one when it closes. The WAL file may be new (SQLite removes it
// when the last connection closes): the first flush after opening it also syncs its folder, whose
// entry for the file would otherwise not be on disk, as SQLite does at a new WAL's first sync.
import { close, closeSync, fdatasync, fsync, open, openSync } from "node:fs";
import path from "node:path";
import { StoreWriterUnavailable } from "./errors.ts";

/** fs.fdatasync's shape, injectable so that tests decide when a flush ends and see what it flushed. */
export type FlushFile = (fd: number, done: (err: NodeJS.ErrnoException | null) => void) => void;

/** Syncs a folder with `sync`, so that the entries of files created in it are on disk. */
function syncFolder(folder: string, sync: FlushFile, done: (err: NodeJS.ErrnoException | null) => void): void {
  open(folder, "r", (err, fd) => {
    if (err) return done(err);
    sync(fd, (syncErr) => close(fd, () => done(syncErr)));
  });
}

interface Waiter {
  /** The count of commits this waiter needs on disk. */
  readonly commits: number;
  readonly resolve: () => void;
  readonly reject: (err: unknown) => void;
}

/**
 * What SQLite itself reports when its fsync fails under synchronous=FULL (SQLITE_IOERR_FSYNC), so
 * that /readyz and the logs say "disk I/O error" as they would have then.
 */
function flushFailure(cause: unknown): StoreWriterUnavailable {
  return Object.assign(new StoreWriterUnavailable("the SQLite WAL could not be flushed to disk; check the disk and retry", { cause }), {
    code: "SQLITE_IOERR_FSYNC",
    rawCode: 1034,
  });
}

export class WalFlush {
  /** Commits made on the connection, and how many of them are known to be on disk. */
  #committed = 0;
  #durable = 0;
  #flushing = false;
  /** In commit order: a waiter's count never exceeds a later one's. */
  #waiting: Waiter[] = [];
  #fd: number | undefined;
  /** The WAL file's folder is synced once the file is opened (it may have been created since the last time). */
  #folderSynced = false;
  /** The descriptor to close once the flush in flight ends (the connection was reopened meanwhile). */
  #retired: number | undefined;
  /** Flushes run, for tests and the benchmark. */
  readonly stats = { flushes: 0 };

  readonly #flushFile: FlushFile;
  readonly #syncFolder: FlushFile;

  /** `flushFile`, for tests, replaces both fdatasync (the WAL file) and fsync (its folder). */
  constructor(
    private readonly walFile: string,
    flushFile?: FlushFile,
  ) {
    this.#flushFile = flushFile ?? fdatasync;
    this.#syncFolder = flushFile ?? fsync;
  }

  /** Whether a commit is not yet known to be on disk. */
  get pending(): boolean {
    return this.#durable < this.#committed;
  }

  /** Records a commit just made; resolves once it is on disk. */
  committed(): Promise<void> {
    this.#committed++;
    return this.#until(this.#committed);
  }

  /**
   * `value` once every commit made so far is on disk: what a read saw may come from a commit that
   * is not yet, and nothing read reaches a caller before it would survive a power cut. (Another
   * process on the same file reads such a commit at once. All it could answer from one is a refresh
   * retry's pair, the pair this process answers once the commit is on disk; after a power cut
   * that lost it, the pair is refused and the client signs in again, which grants nothing more.)
   */
  settled<T>(value: T): Promise<T> {
    if (!this.pending) return Promise.resolve(value);
    return this.#until(this.#committed).then(() => value);
  }

  /** The connection was closed: the WAL file may be a new one when it reopens. */
  reopen(): void {
    if (this.#fd === undefined) return;
    if (this.#flushing) this.#retired = this.#fd;
    else closeSync(this.#fd);
    this.#fd = undefined;
    this.#folderSynced = false;
  }

  #until(commits: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#waiting.push({ commits, resolve, reject });
      this.#start();
    });
  }

  #start(): void {
    if (this.#flushing || !this.pending) return;
    const covers = this.#committed;
    let fd: number;
    try {
      // Opened at the first flush: the WAL file exists once a commit was made.
      this.#fd ??= openSync(this.walFile, "r");
      fd = this.#fd;
    } catch (err) {
      this.#finish(covers, err);
      return;
    }
    this.#flushing = true;
    this.stats.flushes++;
    const ended = (err: NodeJS.ErrnoException | null) => {
      this.#flushing = false;
      if (this.#retired !== undefined) {
        closeSync(this.#retired);
        this.#retired = undefined;
      }
      this.#finish(covers, err);
    };
    this.#flushFile(fd, (err) => {
      if (err || this.#folderSynced) return ended(err);
      syncFolder(path.dirname(this.walFile), this.#syncFolder, (folderErr) => {
        // Unless the file was reopened meanwhile: the new one's entry may be newer than this sync.
        if (!folderErr && this.#fd === fd) this.#folderSynced = true;
        ended(folderErr);
      });
    });
  }

  /**
   * Settles the waiters the flush covered. A failed flush fails them (503, retry): their commits
   * may not be on disk, and no caller hears of a success that was not stored.
   */
  #finish(covers: number, err: unknown): void {
    this.#durable = covers;
    let done = 0;
    while (done < this.#waiting.length && this.#waiting[done]!.commits <= covers) done++;
    const settled = this.#waiting.splice(0, done);
    const failure = err ? flushFailure(err) : undefined;
    for (const waiter of settled) {
      if (failure) waiter.reject(failure);
      else waiter.resolve();
    }
    this.#start();
  }

  /** After the last flush: closes the descriptor. */
  close(): void {
    this.reopen();
  }
}
