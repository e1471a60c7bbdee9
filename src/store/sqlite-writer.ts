// The event-loop thread's side of the SQLite writer thread (sqlite-writer-thread.ts): writes are
// queued, sent as one group per event-loop turn (and, while a group commits, the next one gathers),
// and each caller hears back only after its group's COMMIT returned.
//
// Why a thread: a commit costs the fsync of the WAL, sometimes a checkpoint, and, when another
// process (the CLI) holds the lock, up to busy_timeout of waiting; on the event-loop thread every
// request waited with it. Reads stay on the event-loop thread's own connection: in WAL mode each
// read sees every transaction committed before it started, and no caller hears of a write before
// its COMMIT, so a read made after that answer sees the write.
//
// The process's write gate (sqlite-write-gate.ts) is held from sending a group until its answer:
// a Prisma transaction on this thread then never waits for the writer thread's lock inside
// SQLite's busy handler (which would block the event loop), and the writer thread never waits for
// a Prisma transaction of this process.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";
import { sqliteCannotWriteCode, StoreWriterUnavailable } from "./errors.ts";
import type { SqliteConnectionSettings } from "./sqlite-hot-sql.ts";
import { hotWriteRequest, type HotWriteArgs, type HotWriteName, type HotWriteRequest, type HotWriteResult } from "./sqlite-hot-writes.ts";
import type { WriteError, WriteOutcome } from "./sqlite-group-commit.ts";
import type { WriterReply, WriterRequest, WriterThreadData } from "./sqlite-writer-protocol.ts";
import type { SqliteWriteGate } from "./sqlite-write-gate.ts";

/** The lock waits after which what queued behind would only wait again. */
const LOCK_WAITS = new Set(["SQLITE_BUSY", "SQLITE_LOCKED"]);

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

export class SqliteWriter {
  #thread: Worker | undefined;
  #queue: PendingWrite[] = [];
  #scheduled = false;
  /** The group being committed (the gate is held meanwhile). */
  #inFlight: Promise<void> | undefined;
  readonly #awaited = new Map<number, AwaitedReply>();
  #nextId = 1;
  #closed = false;
  /** Groups committed and writes in them, for the benchmark and tests. */
  readonly stats = { commits: 0, writes: 0, threadsStarted: 0 };

  constructor(
    private readonly file: string,
    private readonly gate: SqliteWriteGate,
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

  /** Commits what is queued, then ends the writer thread. */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#inFlight || this.#queue.length > 0) {
      if (this.#inFlight) await this.#inFlight;
      else this.#sendQueued();
    }
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
    try {
      const reply = await this.#request({ type: "group", writes: group.map((w) => w.request) });
      if (reply.type !== "group") throw new Error(`unexpected reply ${reply.type}`);
      this.stats.commits++;
      this.stats.writes += group.length;
      for (const [i, write] of group.entries()) {
        const outcome = reply.outcomes[i]!;
        if (outcome.ok) write.resolve(outcome.value);
        else write.reject(rebuild(outcome.error));
      }
      this.#failWaitersOfLock(reply.outcomes);
    } catch (err) {
      for (const write of group) write.reject(err);
    } finally {
      release();
    }
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
