// Whether a database is usable by the broker: reachable and migrated (its tables exist), and what
// its writes have been answered lately.
import type { Db } from "./db-types.ts";
import { postgresSqlState, sqliteCannotWriteCode } from "./errors.ts";

/** False when the database cannot be reached or has no schema yet; never throws. */
export async function schemaIsReady(database: { readonly db: Db }): Promise<boolean> {
  try {
    await database.db.client.findFirst({ select: { id: true } });
    return true;
  } catch {
    return false;
  }
}

/** How long a failed write keeps /readyz at 503 when no check can tell that writes work again. */
export const WRITE_FAILURE_WINDOW_MS = 30_000;

/**
 * What a failed write says that no probe of writability.ts can see for itself, in words for
 * /readyz; undefined for every other error (a lock, a lost connection: reported as they are).
 * PostgreSQL's probe only asks whether sessions are read-only: a server whose disk is full (53100)
 * or failing (58030) answers it happily. SQLite's probe writes a page, but a failing disk may
 * refuse only larger writes.
 */
function unseenWriteFailure(err: unknown): string | undefined {
  const sqlite = sqliteCannotWriteCode(err);
  if (sqlite === "SQLITE_FULL") return "a write failed: the database or its disk is full (SQLITE_FULL)";
  if (sqlite === "SQLITE_IOERR") return "a write failed: disk I/O error (SQLITE_IOERR)";
  const state = postgresSqlState(err);
  if (state === "53100") return "a write failed: the PostgreSQL server's disk is full (53100 disk_full)";
  if (state === "58030") return "a write failed: the PostgreSQL server had an I/O error (58030 io_error)";
  return undefined;
}

/**
 * The last write the database refused for a cause the probes cannot see, so that /readyz reports
 * what writes see: 503 while such failures are recent, until a committed probe write (SQLite)
 * shows that writes work again, or WRITE_FAILURE_WINDOW_MS pass without another.
 */
export class WriteFailures {
  private last: { readonly reason: string; readonly at: number } | undefined;

  constructor(private readonly now: () => number = Date.now) {}

  /** Remembers `err` when it is such a failure; anything else is left alone. */
  observe(err: unknown): void {
    const reason = unseenWriteFailure(err);
    if (reason !== undefined) this.last = { reason, at: this.now() };
  }

  /** A write went through: the failures before it are past. */
  clear(): void {
    this.last = undefined;
  }

  /** The reason of the last such failure, while it is recent. */
  recent(): string | undefined {
    if (this.last === undefined) return undefined;
    if (this.now() - this.last.at >= WRITE_FAILURE_WINDOW_MS) {
      this.last = undefined;
      return undefined;
    }
    return this.last.reason;
  }
}
