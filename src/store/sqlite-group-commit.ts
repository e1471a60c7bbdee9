// Group commit for SQLite, on the connection that commits (sqlite-writer.ts): the writes asked for
// together (those of one event-loop turn, and those queued while the previous group committed) run
// in one transaction: one flush of the WAL for all of them instead of one each. A write that fails takes back only its
// own changes. Each outcome is known only after COMMIT returned: an answer sent is an answer stored.
import { runHotWrite, type HotWriteRequest } from "./sqlite-hot-writes.ts";
import type { HotConnection } from "./sqlite-hot-sql.ts";

/** A failed write's error as it crosses back to the event-loop thread (structured clone keeps no own properties of an Error). */
export interface WriteError {
  readonly name: string;
  readonly message: string;
  readonly code?: unknown;
  readonly rawCode?: unknown;
}

export type WriteOutcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: WriteError };

function describe(err: unknown): WriteError {
  const e = err as { name?: unknown; message?: unknown; code?: unknown; rawCode?: unknown } | null;
  return {
    name: typeof e?.name === "string" ? e.name : "Error",
    message: typeof e?.message === "string" ? e.message : String(err),
    code: e?.code,
    rawCode: e?.rawCode,
  };
}

/** Commits `writes` (together when they all succeed) and returns each one's outcome, in order. */
export function commitGroup(connection: HotConnection, writes: readonly HotWriteRequest[]): WriteOutcome[] {
  const failAll = (err: unknown): WriteOutcome[] => {
    connection.dropIfReadOnly(err);
    const error = describe(err);
    return writes.map(() => ({ ok: false, error }));
  };
  // All together first; a write that throws (rare: a broken row, a failing disk) sends the group
  // back to one transaction per write, so that it fails alone. Savepoints would have cost two
  // statements per write on every group instead. When BEGIN or COMMIT fails (the lock stayed
  // taken past busy_timeout, the disk failed), every write fails at once: retrying each would
  // wait out busy_timeout once per write.
  let writeFailed = false;
  try {
    const values = transaction(connection, () =>
      writes.map((write) => {
        try {
          return runHotWrite(connection, write);
        } catch (err) {
          writeFailed = true;
          throw err;
        }
      }),
    );
    return values.map((value) => ({ ok: true, value }));
  } catch (err) {
    if (!writeFailed || writes.length === 1) return failAll(err);
  }
  return writes.map((write) => {
    try {
      return { ok: true, value: transaction(connection, () => runHotWrite(connection, write)) };
    } catch (err) {
      connection.dropIfReadOnly(err);
      return { ok: false, error: describe(err) };
    }
  });
}

/** BEGIN IMMEDIATE, `work`, COMMIT; ROLLBACK when anything throws. */
function transaction<T>(connection: HotConnection, work: () => T): T {
  const db = connection.db();
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
        // The connection is beyond use; the next write reopens it (dropIfReadOnly) or fails clearly.
      }
    }
    throw err;
  }
}
