// Creates the Prisma client for the configured database: SQLite (libsql driver adapter) or
// PostgreSQL (pg driver adapter). Both clients come from one data model (prisma/sqlite is the
// source, prisma/postgres is derived), so the rest of the code sees a single `Db` type.
import { mkdirSync } from "node:fs";
import path from "node:path";
import { PrismaClient as SqliteClient } from "./generated/sqlite/client.ts";
import type { Db } from "./db-types.ts";
import { ConfiguredPrismaLibSQL } from "./sqlite-connections.ts";
import { assertWritable, checkWritable, DatabaseNotWritableError, type WritableTarget, type WriteCheck } from "./writability.ts";
import { databaseKindOf, type DatabaseKind } from "../config/database-kind.ts";
import { WriteFailures } from "./readiness.ts";
import type { HotStore } from "./hot-store.ts";
import { createSqliteHotStore } from "./hot-store-sqlite.ts";

export type { Db, Prisma, Tx } from "./db-types.ts";
export { databaseKindOf, type DatabaseKind } from "../config/database-kind.ts";

const hotStores = new WeakMap<Db, HotStore>();

/** The hot store opened with this Prisma client (openDatabase pairs them). */
export function hotStoreOf(db: Db): HotStore {
  const hot = hotStores.get(db);
  if (!hot) throw new Error("this Prisma client was not opened by openDatabase: it has no hot store");
  return hot;
}

/**
 * The store with every statement counted (mab_database_queries_total counts both layers) and its
 * failures shown to `failed` (what writes see, for /readyz).
 */
function countedHotStore(store: HotStore, count: () => void, failed: (err: unknown) => void): HotStore {
  const wrapped: Record<string, unknown> = { kind: store.kind, close: () => store.close() };
  for (const [name, method] of Object.entries(store)) {
    if (typeof method !== "function" || name in wrapped) continue;
    wrapped[name] = (...args: unknown[]) => {
      count();
      const result = (method as (...a: unknown[]) => unknown)(...args);
      return result instanceof Promise
        ? result.catch((err: unknown) => {
            failed(err);
            throw err;
          })
        : result;
    };
  }
  return wrapped as unknown as HotStore;
}

/** Resolves a `file:` URL against cwd, as the Prisma CLI does, and makes sure its folder exists. */
export function sqliteFilePath(url: string, cwd: string = process.cwd()): string {
  const file = url.replace(/^file:/i, "").replace(/\?.*$/, "");
  return path.resolve(cwd, file);
}

export interface Database {
  /** Prisma: the schema's client, for every cold path. */
  readonly db: Db;
  /** Hand-written prepared statements for the per-token paths (hot-store.ts). */
  readonly hot: HotStore;
  readonly kind: DatabaseKind;
  /** Counts every query the client sends; the benchmark reads it to prove the hot path is cache-only. */
  readonly queryCount: () => number;
  /**
   * Whether this process can write to the database right now (for /readyz): the probes of
   * writability.ts, and what recent writes were answered (readiness.ts).
   */
  readonly checkWritable: () => Promise<WriteCheck>;
  readonly close: () => Promise<void>;
}

/** Creates the SQLite file's folder if needed; a clear DatabaseNotWritableError when it cannot. */
export function prepareSqliteFolder(file: string): void {
  try {
    mkdirSync(path.dirname(file), { recursive: true });
  } catch (err) {
    throw new DatabaseNotWritableError(
      `cannot create the database folder ${path.dirname(file)} (${(err as NodeJS.ErrnoException).code}): create it, writable by the user running the broker, or change DATABASE_URL`,
    );
  }
}

/**
 * Prisma waits 2 s for a connection to start an interactive transaction and gives it 5 s: a burst of
 * sign-ins (each callback is one transaction) on a busy machine exceeds both, and the sign-in failed.
 * A transaction that still cannot start is answered 503 (store/errors.ts), not 500.
 */
const TRANSACTION_OPTIONS = { maxWait: 10_000, timeout: 15_000 } as const;

/** The Prisma client and the hot store of the database, not yet counted nor checked. */
async function openClients(kind: DatabaseKind, url: string, cwd: string): Promise<{ db: Db; hot: HotStore; file: string | undefined }> {
  if (kind === "postgres") {
    // Loaded only for PostgreSQL: a SQLite broker (and every CLI command on one) starts without pg
    // and the second Prisma client.
    const [{ PrismaPg }, { PrismaClient: PostgresClient }, { createPostgresHotStore }] = await Promise.all([
      import("@prisma/adapter-pg"),
      import("./generated/postgres/client.ts"),
      import("./hot-store-postgres.ts"),
    ]);
    const client = new PostgresClient({ adapter: new PrismaPg({ connectionString: url }), transactionOptions: TRANSACTION_OPTIONS });
    // The two generated clients differ only in PostgreSQL-only options ($transaction isolation
    // levels); every query the application makes is valid on both.
    return { db: client as unknown as Db, hot: createPostgresHotStore(url), file: undefined };
  }
  const file = sqliteFilePath(url, cwd);
  prepareSqliteFolder(file);
  // busy_timeout, synchronous and foreign_keys are set on every connection by the adapter.
  const db = new SqliteClient({ adapter: new ConfiguredPrismaLibSQL({ url: `file:${file}` }), transactionOptions: TRANSACTION_OPTIONS });
  return { db, hot: createSqliteHotStore(file), file };
}

/** Both layers with every query counted and every failure shown to `writeFailures`. */
function countedClients(db: Db, rawHot: HotStore, writeFailures: WriteFailures): { counted: Db; hot: HotStore; queryCount: () => number } {
  let queries = 0;
  const counted = db.$extends({
    query: {
      async $allOperations({ args, query }) {
        queries++;
        try {
          return await query(args);
        } catch (err) {
          writeFailures.observe(err);
          throw err;
        }
      },
    },
  }) as unknown as Db;
  const hot = countedHotStore(
    rawHot,
    () => queries++,
    (err) => writeFailures.observe(err),
  );
  return { counted, hot, queryCount: () => queries };
}

/** A database that cannot be written stops here, with both layers closed. */
async function checkOpened(target: WritableTarget, db: Db, hot: HotStore): Promise<void> {
  try {
    // First, before WAL is set: on a read-only file that would fail less clearly.
    await assertWritable(target);
    if (target.kind === "sqlite") {
      // WAL lets the CLI and the server share the file (readers never block the writer). It is
      // recorded in the file, so once is enough for every connection.
      await db.$queryRawUnsafe("PRAGMA journal_mode = WAL");
    }
  } catch (err) {
    await db.$disconnect().catch(() => undefined);
    await hot.close().catch(() => undefined);
    throw err;
  }
}

/**
 * Opens the database and checks that this process can write to it: a read-only file, folder or
 * server fails here with a one-line DatabaseNotWritableError that names it and says what to change
 * (a database that is only busy or unreachable right now does not stop the start).
 */
export async function openDatabase(url: string, cwd: string = process.cwd()): Promise<Database> {
  const kind = databaseKindOf(url);
  const { db, hot: rawHot, file } = await openClients(kind, url, cwd);
  const writeFailures = new WriteFailures();
  const { counted, hot, queryCount } = countedClients(db, rawHot, writeFailures);
  hotStores.set(counted, hot);
  const target: WritableTarget = { kind, db: counted, file, url };
  await checkOpened(target, db, hot);
  return {
    db: counted,
    hot,
    kind,
    queryCount,
    async checkWritable() {
      const check = await checkWritable(target);
      if (!check.ok) return check;
      if (check.committed) {
        writeFailures.clear();
        return { ok: true };
      }
      const failed = writeFailures.recent();
      return failed === undefined ? { ok: true } : { ok: false, transient: true, reason: failed, detail: failed };
    },
    async close() {
      // The hot store first: its last group commit may still be queued.
      await hot.close();
      await db.$disconnect();
    },
  };
}
