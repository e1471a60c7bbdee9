// The hot store's writes on SQLite. Writes are queued and committed as one group per event-loop
// turn, on the event loop's own connection (the one reads use), and each caller hears back only
// once its group is on disk (wal-flush.ts). What would make the event loop wait goes to the writer
// thread (sqlite-writer-thread.ts): a group that found the write lock taken by another process (the
// CLI, a second instance) is committed there, waiting for the lock, and so are WAL checkpoints.
//
// Why commits on the event loop: the writer thread used to commit every group, and it cost about
// 15% of a refresh's CPU (measured against commits on this thread, paired rounds of the bench's
// rows d, h and w): its messages and wake-ups, and the reading connection's page cache, which
// SQLite drops whenever another connection commits. What kept commits off this thread was the
// fsync inside COMMIT (synchronous=FULL) and lock waits; the fsync now runs in the thread pool
// (wal-flush.ts), lock waits on the writer thread.
//
// The process's write gate (sqlite-write-gate.ts) is held while a group commits (here, or from
// sending it to the thread until the answer): a Prisma transaction then never waits for the hot
// store's lock inside SQLite's busy handler (which would block the event loop), nor the hot store
// for one of Prisma's.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { sqliteCannotWriteCode, StoreWriterUnavailable } from "./errors.ts";
import type { HotConnection, SqliteConnectionSettings } from "./sqlite-hot-sql.ts";
import { hotWriteRequest, type HotWriteArgs, type HotWriteName, type HotWriteRequest, type HotWriteResult } from "./sqlite-hot-writes.ts";
import { commitGroup, type WriteError, type WriteOutcome } from "./sqlite-group-commit.ts";
import type { WalFlush } from "./wal-flush.ts";
import type { WriterReply, WriterRequest, WriterThreadData } from "./sqlite-writer-protocol.ts";
import type { SqliteWriteGate } from "./sqlite-write-gate.ts";

/** The lock waits after which what queued behind would only wait again. */
const LOCK_WAITS = new Set(["SQLITE_BUSY", "SQLITE_LOCKED"]);

/**
 * The WAL's length at which the writer thread is asked for a checkpoint: SQLite's own automatic
 * checkpoint runs at 1,000 pages, which it counts as it commits. The event loop cannot read that
 * count; the checkpoint answers with it, and the commits between two checkpoints follow from the
 * pages the last ones wrote (a group of 9 refreshes writes about 40 pages: bench row (w)).
 */
const CHECKPOINT_PAGES = 1000;
/** Commits before the first checkpoint, before any is measured. */
export const FIRST_CHECKPOINT_AFTER_COMMITS = 25;
const MAX_COMMITS_BETWEEN_CHECKPOINTS = 1000;

interface PendingWrite {
  readonly request: HotWriteRequest;
  readonly resolve: (value: unknown) => void;
  readonly reject: (err: unknown) => void;
}

interface AwaitedReply {
  readonly resolve: (reply: WriterReply) => void;
  readonly reject: (err: unknown) => void;
}

type RequestBody = WriterRequest extends infer R ? (R extends WriterRequest ? Omit<R, "id"> : never) : never;

/**
 * The compiled thread in dist/, when it was built from the sources as they are now: no file of
 * src/store (the thread imports nothing from elsewhere) is newer than the last build.
 */
function upToDateBuild(here: string): URL | undefined {
  const store = fileURLToPath(new URL(".", here));
  const built = new URL("../../dist/store/sqlite-writer-thread.js", here);
  try {
    const builtAt = statSync(new URL("../../dist/.tsbuildinfo", here)).mtimeMs;
    if (!existsSync(built)) return undefined;
    const newest = Math.max(...readdirSync(store).map((name) => statSync(path.join(store, name)).mtimeMs));
    return newest < builtAt ? built : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts the writer thread: from dist/ the compiled sibling; from the TypeScript sources (ts-jest,
 * tsx), the same code compiled in dist/ when that build is current (a thread under tsx's loader
 * takes ~130 ms more to start, and the test suite starts hundreds), else the .ts file through
 * tsx's loader, which the thread does not inherit.
 */
function startWriterThread(data: WriterThreadData): Worker {
  const here = import.meta.url;
  if (here.endsWith(".js")) return new Worker(new URL("./sqlite-writer-thread.js", here), { workerData: data });
  const built = upToDateBuild(here);
  if (built) return new Worker(built, { workerData: data });
  // tsx's ESM entry (its CommonJS one registers the hooks from a wrong path).
  const manifest = createRequire(here).resolve("tsx/package.json");
  const exports = (JSON.parse(readFileSync(manifest, "utf8")) as { exports: Record<string, { import: { default: string } }> }).exports;
  const tsx = pathToFileURL(path.join(path.dirname(manifest), exports["./esm/api"]!.import.default)).href;
  const thread = new URL("./sqlite-writer-thread.ts", here).href;
  return new Worker(`import { register } from ${JSON.stringify(tsx)}; register(); await import(${JSON.stringify(thread)});`, {
    eval: true,
    workerData: data,
  });
}

/** A failed write's error, rebuilt with the properties store/errors.ts classifies by (code, rawCode). */
function rebuild(error: WriteError): Error {
  return Object.assign(new Error(error.message), { name: error.name, code: error.code, rawCode: error.rawCode });
}

/** Tells each write of a group its outcome. */
function settle(group: readonly PendingWrite[], outcomes: readonly WriteOutcome[]): void {
  for (const [i, write] of group.entries()) {
    const outcome = outcomes[i]!;
    if (outcome.ok) write.resolve(outcome.value);
    else write.reject(rebuild(outcome.error));
  }
}

export class SqliteWriter {
  #thread: Worker | undefined;
  #queue: PendingWrite[] = [];
  #scheduled = false;
  /** The group being committed (the gate is held meanwhile). */
  #inFlight: Promise<void> | undefined;
  readonly #awaited = new Map<number, AwaitedReply>();
  #nextId = 1;
  #closed = false;
  #commitsSinceCheckpoint = 0;
  #checkpointing = false;
  /**
   * Groups committed (of them on the writer thread) and writes in them, checkpoints and the commits
   * between two of them, for the benchmark and tests.
   */
  readonly stats = { commits: 0, writes: 0, onThread: 0, checkpoints: 0, checkpointEvery: FIRST_CHECKPOINT_AFTER_COMMITS, threadsStarted: 0 };

  /** `here`: the event loop's connection (HotConnection with onEventLoop), its WAL flushed by `flush`. */
  constructor(
    private readonly file: string,
    private readonly gate: SqliteWriteGate,
    private readonly here: HotConnection,
    private readonly flush: WalFlush,
  ) {}

  /** Runs the named write in the next group; resolves with its result once that group committed. */
  write<N extends HotWriteName>(name: N, ...args: HotWriteArgs<N>): Promise<HotWriteResult<N>> {
    if (this.#closed) return Promise.reject(new StoreWriterUnavailable("the store is closed"));
    let request: HotWriteRequest;
    try {
      // Encoded here, on the event-loop thread (sqlite-hot-writes.ts): an argument that cannot be
      // encoded fails this write alone.
      request = hotWriteRequest(name, ...args);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<HotWriteResult<N>>((resolve, reject) => {
      this.#queue.push({ request, resolve: resolve as (value: unknown) => void, reject });
      if (this.#scheduled || this.#inFlight) return;
      this.#scheduled = true;
      // After this turn's I/O callbacks: every request read in this turn has queued its write.
      setImmediate(() => {
        this.#scheduled = false;
        this.#sendQueued();
      });
    });
  }

  /** The writer thread's connection settings (for tests: every connection must carry them). */
  async connectionSettings(): Promise<SqliteConnectionSettings> {
    const reply = await this.#request({ type: "settings" });
    if (reply.type !== "settings") throw new Error(`unexpected reply ${reply.type}`);
    return reply.settings;
  }

  /**
   * Ends the writer thread without letting it finish (as a crash would), for tests: what was
   * committed stays, what was in flight fails with StoreWriterUnavailable, the next write starts a
   * new thread.
   */
  async crashForTest(): Promise<void> {
    await this.#thread?.terminate();
  }

  /** Commits what is queued and waits until it is on disk, then ends the writer thread. */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#inFlight || this.#queue.length > 0) {
      if (this.#inFlight) await this.#inFlight;
      else this.#sendQueued();
    }
    await this.flush.settled(undefined).catch(() => undefined);
    const thread = this.#thread;
    if (!thread) return;
    await this.#request({ type: "close" }).catch(() => undefined);
    // The thread closed its port after answering and exits; terminate in case it cannot.
    await thread.terminate();
  }

  #sendQueued(): void {
    if (this.#inFlight || this.#queue.length === 0) return;
    this.#inFlight = this.#commitNextGroup().finally(() => {
      this.#inFlight = undefined;
      // What queued while that group committed goes now: it has waited one commit already.
      this.#sendQueued();
    });
  }

  async #commitNextGroup(): Promise<void> {
    const release = await this.gate.acquire();
    // Taken once the gate is held: writes queued while a Prisma transaction held it join this group.
    const group = this.#queue;
    this.#queue = [];
    const requests = group.map((w) => w.request);
    try {
      const outcomes = this.#commitHere(requests);
      if (outcomes) {
        release();
        this.#count(group.length);
        this.#answerOnceOnDisk(group, outcomes);
        this.#checkpointNowAndThen();
        return;
      }
      const reply = await this.#request({ type: "group", writes: requests });
      if (reply.type !== "group") throw new Error(`unexpected reply ${reply.type}`);
      this.#count(group.length);
      this.stats.onThread++;
      settle(group, reply.outcomes);
      this.#failWaitersOfLock(reply.outcomes);
    } catch (err) {
      for (const write of group) write.reject(err);
    } finally {
      release();
    }
  }

  /**
   * The group's outcomes, committed on the event loop's connection; undefined when it is for the
   * writer thread: another process holds the write lock (every write was refused at once, so
   * nothing of the group committed), or the database is not in WAL mode.
   */
  #commitHere(requests: readonly HotWriteRequest[]): WriteOutcome[] | undefined {
    let inWal: boolean;
    try {
      inWal = this.here.inWal;
    } catch {
      // The file cannot be opened here: the writer thread says why.
      return undefined;
    }
    if (!inWal) return undefined;
    const outcomes = commitGroup(this.here, requests);
    const first = outcomes[0];
    const lockTaken = first && !first.ok && outcomes.every((o) => !o.ok) && LOCK_WAITS.has(sqliteCannotWriteCode(rebuild(first.error)) ?? "");
    return lockTaken ? undefined : outcomes;
  }

  #count(writes: number): void {
    this.stats.commits++;
    this.stats.writes += writes;
  }

  /** Each caller hears its outcome once the group's commit is on disk (at once when nothing committed). */
  #answerOnceOnDisk(group: readonly PendingWrite[], outcomes: readonly WriteOutcome[]): void {
    if (outcomes.every((o) => !o.ok)) {
      settle(group, outcomes);
      return;
    }
    this.flush.committed().then(
      () => settle(group, outcomes),
      (err: unknown) => {
        for (const write of group) write.reject(err);
      },
    );
  }

  /** Asks the writer thread for a checkpoint once the WAL holds about CHECKPOINT_PAGES pages, one at a time. */
  #checkpointNowAndThen(): void {
    if (++this.#commitsSinceCheckpoint < this.stats.checkpointEvery || this.#checkpointing) return;
    const commits = this.#commitsSinceCheckpoint;
    this.#commitsSinceCheckpoint = 0;
    this.#checkpointing = true;
    this.#request({ type: "checkpoint" })
      .then((reply) => {
        // A checkpoint that failed (the disk, a read-only file) is tried again after as many
        // commits; the writes themselves report such a failure.
        if (reply.type !== "checkpoint" || reply.error !== undefined) return;
        this.stats.checkpoints++;
        if (reply.walPages > 0) {
          const every = Math.round((commits * CHECKPOINT_PAGES) / reply.walPages);
          this.stats.checkpointEvery = Math.min(MAX_COMMITS_BETWEEN_CHECKPOINTS, Math.max(1, every));
        }
      })
      .catch(() => undefined)
      .finally(() => {
        this.#checkpointing = false;
      });
  }

  /**
   * When a group failed because another process held the lock past busy_timeout, the writes that
   * queued meanwhile fail with it (503, retry) instead of each waiting out busy_timeout in turn:
   * under a lock held for a minute (a backup) the tenth request would otherwise wait 50 s. Each
   * write waits at most about one busy_timeout.
   */
  #failWaitersOfLock(outcomes: readonly WriteOutcome[]): void {
    const first = outcomes[0];
    if (!first || first.ok || !outcomes.every((o) => !o.ok)) return;
    const error = rebuild(first.error);
    if (!LOCK_WAITS.has(sqliteCannotWriteCode(error) ?? "")) return;
    const waiting = this.#queue;
    this.#queue = [];
    for (const write of waiting) write.reject(error);
  }

  #request(body: RequestBody): Promise<WriterReply> {
    const thread = this.#threadRunning();
    const id = this.#nextId++;
    return new Promise<WriterReply>((resolve, reject) => {
      this.#awaited.set(id, { resolve, reject });
      // Kept alive only while an answer is awaited: an idle writer never holds the process open.
      if (this.#awaited.size === 1) thread.ref();
      try {
        thread.postMessage({ ...body, id } as WriterRequest);
      } catch (err) {
        // An argument structured clone cannot copy: this request fails alone.
        this.#awaited.delete(id);
        if (this.#awaited.size === 0) thread.unref();
        reject(err);
      }
    });
  }

  #threadRunning(): Worker {
    if (this.#thread) return this.#thread;
    const thread = startWriterThread({ file: this.file });
    this.stats.threadsStarted++;
    thread.unref();
    thread.on("message", (reply: WriterReply) => {
      const awaited = this.#awaited.get(reply.id);
      if (!awaited) return;
      this.#awaited.delete(reply.id);
      if (this.#awaited.size === 0) thread.unref();
      awaited.resolve(reply);
    });
    let failure: Error | undefined;
    thread.on("error", (err) => {
      failure = err;
    });
    thread.on("exit", (code) => {
      if (this.#thread === thread) this.#thread = undefined;
      // Whatever the thread had not answered may or may not have committed: the callers hear that
      // the store is unavailable (503, retry), never a success that was not stored.
      const err = new StoreWriterUnavailable(
        `the SQLite writer thread stopped (${failure ? failure.message : `exit code ${code}`}) before answering`,
        failure ? { cause: failure } : undefined,
      );
      const awaited = [...this.#awaited.values()];
      this.#awaited.clear();
      for (const a of awaited) a.reject(err);
    });
    this.#thread = thread;
    return thread;
  }
}
