// Can this process write to its database? Checked at start (openDatabase refuses to start on a
// read-only database, with a one-line error saying what to change) and by /readyz (503 with the
// reason, instead of 200 while every write fails).
import { accessSync, constants, existsSync, statfsSync } from "node:fs";
import { userInfo } from "node:os";
import path from "node:path";
import type { DatabaseKind } from "../config/database-kind.ts";
import type { Db } from "./db-types.ts";
import { isDatabaseUnavailable, postgresSqlState, sqliteCannotWriteCode } from "./errors.ts";

export class DatabaseNotWritableError extends Error {}

/**
 * `reason` is safe to show on /readyz (no paths); `detail` names the file or database and what to
 * do, for the start error. `transient`: only busy, may clear by itself.
 */
export interface WriteProblem {
  readonly ok: false;
  readonly reason: string;
  readonly detail: string;
  readonly transient: boolean;
}

/** `committed`: the check wrote to the database for real (SQLite), so what writes failed with before is past. */
export type WriteCheck = { readonly ok: true; readonly committed?: boolean } | WriteProblem;

/** The user the broker runs as, for messages ("user nobody"). */
function runningAs(): string {
  try {
    return `user ${userInfo().username}`;
  } catch {
    return `uid ${process.getuid?.() ?? "?"}`;
  }
}

/**
 * What the file system says, as this process sees it (access(2) knows the user, EROFS and
 * immutable files): the database file, its -wal and -shm when present, and its folder, where
 * SQLite creates them. ~20 µs; catches a file made read-only after start at once, where SQLite
 * notices only at its next write to disk or its next new connection.
 */
export function sqliteFileProblem(file: string): WriteProblem | undefined {
  const fix = `give ${runningAs()} (the user running the broker) write access to it and to its folder`;
  for (const candidate of [file, `${file}-wal`, `${file}-shm`]) {
    if (!existsSync(candidate)) continue;
    try {
      accessSync(candidate, constants.W_OK);
    } catch (err) {
      const name = path.basename(candidate);
      if ((err as NodeJS.ErrnoException).code === "EROFS") {
        return {
          ok: false,
          transient: false,
          reason: `the database file ${name} is on a read-only file system`,
          detail: `the database file ${candidate} is on a read-only file system: move it to a writable disk (DATABASE_URL) or remount the disk read-write`,
        };
      }
      return {
        ok: false,
        transient: false,
        reason: `the database file ${name} is read-only for this process`,
        detail: `the database file ${candidate} is read-only for this process: ${fix}`,
      };
    }
  }
  const folder = path.dirname(file);
  try {
    accessSync(folder, constants.W_OK);
  } catch (err) {
    const readOnlyFs = (err as NodeJS.ErrnoException).code === "EROFS";
    return {
      ok: false,
      transient: false,
      reason: readOnlyFs ? "the database folder is on a read-only file system" : "the database folder is not writable for this process",
      detail: `the database folder ${folder} is ${readOnlyFs ? "on a read-only file system" : "not writable for this process"} (SQLite creates ${path.basename(file)}-wal and -shm there): ${readOnlyFs ? "move the database to a writable disk (DATABASE_URL)" : `give ${runningAs()} (the user running the broker) write access to it`}`,
    };
  }
  return undefined;
}

/**
 * Below this much free space the disk holding a SQLite database counts as full: one group commit
 * appends tens of pages to the WAL, and a checkpoint may grow the file.
 */
export const MIN_FREE_BYTES = 1024 * 1024;

/**
 * The disk holding the database is full (for this process: root may use the blocks reserved for
 * it). A one-page write can still succeed on a full disk when the WAL file is reused from its
 * start after a checkpoint, while larger writes fail: the free space says what they will see.
 */
export function sqliteDiskFull(file: string): WriteProblem | undefined {
  const folder = path.dirname(file);
  let free: number;
  try {
    const fs = statfsSync(folder);
    free = (process.getuid?.() === 0 ? fs.bfree : fs.bavail) * fs.bsize;
  } catch {
    return undefined;
  }
  if (free >= MIN_FREE_BYTES) return undefined;
  return {
    ok: false,
    // It may clear (logs rotated, space freed): not a reason to refuse to start.
    transient: true,
    reason: `the disk holding the database is full (${Math.floor(free / 1024)} KiB free)`,
    detail: `the disk holding the database file ${file} is full (${Math.floor(free / 1024)} KiB free): free space on it, or move the database to a larger disk (DATABASE_URL)`,
  };
}

/** An adapter error's own message, without libsql's "SQLITE_X: " prefix. */
function sqliteMessage(err: unknown): string {
  const cause =
    (err as { cause?: { originalMessage?: unknown } }).cause ??
    (err as { meta?: { driverAdapterError?: { cause?: { originalMessage?: unknown } } } }).meta?.driverAdapterError?.cause;
  const message = typeof cause?.originalMessage === "string" ? cause.originalMessage : (err as Error).message;
  return message.replace(/^[A-Z0-9_]+: /, "").split("\n")[0]!;
}

/**
 * SQLite: a real write, committed, of nothing that matters: the database header's user_version
 * set to the value it has. Its commit appends a page to the WAL (or journal) and syncs it, as every
 * write does: a full or failing disk answers it as it answers real writes (SQLITE_FULL,
 * SQLITE_IOERR), where a rolled-back write touched no disk and said "writable" on a full disk. The
 * write lock it takes is refused on a read-only connection (SQLITE_READONLY*) and delayed up to
 * busy_timeout by another process's lock. Schema-independent (works on an empty file). Measured
 * ~1 ms (a Prisma interactive transaction and one fsync; SELECT 1 alone is ~0.25 ms).
 */
async function sqliteWriteProbe(db: Db, file: string): Promise<WriteCheck> {
  for (let attempt = 1; ; attempt++) {
    try {
      await db.$transaction(async (tx) => {
        const [row] = await tx.$queryRawUnsafe<Array<{ user_version: number | bigint }>>("PRAGMA user_version");
        await tx.$executeRawUnsafe(`PRAGMA user_version = ${Number(row?.user_version ?? 0)}`);
      });
      return { ok: true, committed: true };
    } catch (err) {
      const code = sqliteCannotWriteCode(err);
      if (!code) throw err;
      // A connection SQLite opened read-only while the file was not writable stays read-only; the
      // refused transaction had it replaced (sqlite-connections.ts), so once more on the new one
      // tells whether the file is writable now.
      if (code === "SQLITE_READONLY" && attempt === 1) continue;
      const busy = code === "SQLITE_BUSY" || code === "SQLITE_LOCKED";
      const message = busy ? "database is locked" : sqliteMessage(err);
      return {
        ok: false,
        // Busy, or a full disk: may clear by itself (not a reason to refuse to start).
        transient: busy || code === "SQLITE_FULL",
        reason: `SQLite cannot write: ${message} (${code})`,
        detail: busy
          ? `the database file ${file} stayed locked by another process for longer than busy_timeout (${code})`
          : `the database file ${file} cannot be written: ${message} (${code}): check that ${runningAs()} can write it and its folder, and that the disk is healthy and not full`,
      };
    }
  }
}

/** Where a PostgreSQL URL points, without credentials: host:port/database. */
function postgresTarget(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}${u.port ? `:${u.port}` : ""}${u.pathname}`;
  } catch {
    return "(DATABASE_URL)";
  }
}

/**
 * PostgreSQL: is this session read-only? `transaction_read_only` is on on a standby (in recovery)
 * and when default_transaction_read_only is set for the server, database or role. One round trip.
 */
async function postgresReadOnly(db: Db, url: string): Promise<WriteCheck> {
  const [row] = await db.$queryRawUnsafe<Array<{ read_only: string; in_recovery: boolean }>>(
    "SELECT current_setting('transaction_read_only') AS read_only, pg_is_in_recovery() AS in_recovery",
  );
  if (row?.read_only !== "on") return { ok: true };
  const why = row.in_recovery ? "the server is a standby in recovery" : "default_transaction_read_only is on";
  const fix = row.in_recovery
    ? "point DATABASE_URL at the primary server"
    : "turn default_transaction_read_only off for this database and role, or point DATABASE_URL at a writable server";
  return {
    ok: false,
    transient: false,
    reason: `PostgreSQL sessions are read-only: ${why}`,
    detail: `the PostgreSQL database ${postgresTarget(url)} is read-only (${why}): ${fix}`,
  };
}

export interface WritableTarget {
  readonly kind: DatabaseKind;
  readonly db: Db;
  /** SQLite: the database file. */
  readonly file?: string;
  /** PostgreSQL: the connection URL (only its host and database are ever shown). */
  readonly url?: string;
}

/**
 * Checks that the database can be written now. Rejects only when the database cannot be reached
 * at all (or with an unexpected error); every "reachable but cannot write" answer is a WriteCheck.
 */
export async function checkWritable(target: WritableTarget): Promise<WriteCheck> {
  if (target.kind === "postgres") {
    try {
      return await postgresReadOnly(target.db, target.url ?? "").catch((err: unknown) => {
        // A pooled connection the server closed (a restart, an administrator, a failover) fails
        // once and leaves the pool: ask again on a fresh one before saying "unreachable".
        if (isDatabaseUnavailable(err)) return postgresReadOnly(target.db, target.url ?? "");
        throw err;
      });
    } catch (err) {
      if (postgresSqlState(err) === "25006")
        return {
          ok: false,
          transient: false,
          reason: "PostgreSQL sessions are read-only",
          detail: `the PostgreSQL database ${postgresTarget(target.url ?? "")} is read-only: point DATABASE_URL at a writable server`,
        };
      throw err;
    }
  }
  const file = target.file!;
  return sqliteFileProblem(file) ?? sqliteDiskFull(file) ?? (await sqliteWriteProbe(target.db, file));
}

/**
 * For openDatabase: fails with a one-line DatabaseNotWritableError when the database is
 * definitely not writable. Busy or unreachable at this moment is not a reason to refuse to
 * start (it may clear; /readyz reports it meanwhile).
 */
export async function assertWritable(target: WritableTarget): Promise<void> {
  let result: WriteCheck;
  try {
    result = await checkWritable(target);
  } catch (err) {
    if (isDatabaseUnavailable(err)) return;
    throw err;
  }
  if (!result.ok && !result.transient) throw new DatabaseNotWritableError(result.detail);
}
