// The settings every SQLite connection of this process carries (Prisma's, the hot store's reader
// and its writer thread), in a module of their own so that the writer thread loads nothing else.

/** How long a statement waits for another process's lock before failing with SQLITE_BUSY. */
export const SQLITE_BUSY_TIMEOUT_MS = 5000;

/**
 * Per-connection settings, busy_timeout first so the others already wait. synchronous=FULL: a
 * committed grant or revocation survives a power cut (WAL + NORMAL could lose the last commits);
 * it costs one fsync per commit (~0.2–0.3 ms here). foreign_keys: the schema relies on cascades.
 * Two calls: `busy_timeout = n` answers a row, which executeMultiple refuses; the other two go
 * through executeMultiple because the client's execute path costs ~0.2 ms for `foreign_keys = ON`
 * (measured) against a few µs there.
 */
export const SQLITE_CONNECTION_PRAGMAS = {
  withRow: `PRAGMA busy_timeout = ${SQLITE_BUSY_TIMEOUT_MS}`,
  rowless: "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON",
};

/**
 * The hot store's connection on the event-loop thread, which reads and commits most writes
 * (sqlite-writer.ts), after the settings above:
 * - busy_timeout 0: nothing waits for a lock on the event loop. A group refused because another
 *   process holds the write lock goes to the writer thread, which waits; a read is refused only
 *   while another process recovers the WAL after a crash (503, retry).
 * - synchronous NORMAL: COMMIT does not wait for the disk; wal-flush.ts flushes the WAL in the
 *   thread pool before any caller hears of the commit, so an answer sent is still an answer stored.
 * - wal_autocheckpoint 0: checkpoints (two fsyncs and the copy of every page) run on the writer
 *   thread, asked for every CHECKPOINT_EVERY_COMMITS commits.
 */
export const SQLITE_EVENT_LOOP_PRAGMAS = {
  /** Each answers a row, which executeMultiple refuses. */
  withRow: ["PRAGMA busy_timeout = 0", "PRAGMA wal_autocheckpoint = 0"],
  rowless: "PRAGMA synchronous = NORMAL",
};
