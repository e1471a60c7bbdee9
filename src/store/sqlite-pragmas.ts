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
