// Recognises a database that cannot be used right now (down, restarting, out of connections,
// network cut, or unable to write: read-only, locked, disk full or failing) as opposed to a bug:
// callers answer 503 and retry later instead of a 500.

/**
 * The store's own writer cannot take writes: the SQLite writer thread stopped before answering, or
 * the WAL could not be flushed to disk (the write may or may not have been stored: the client
 * retries, as after any lost answer), or the store was closed.
 */
export class StoreWriterUnavailable extends Error {
  override readonly name = "StoreWriterUnavailable";
}

/** Driver adapter error kinds (Prisma 6 adapters) that say "not reachable now". The libsql adapter reports SQLITE_BUSY as SocketTimeout. */
const UNAVAILABLE_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections", "TlsConnectionError"]);
/**
 * Prisma's own codes for the same: can't reach, timeout, operations timeout, connection closed, pool
 * timeout, and a transaction that could not start (or ran out of time) while every connection was
 * busy (P2028): a burst of sign-ins at once is answered "try again", never 500.
 */
const PRISMA_UNAVAILABLE_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2028"]);
/**
 * PostgreSQL SQLSTATEs: class 08 (connection exception), 53 (insufficient resources), 57P
 * (shutdown, cannot connect now), 55000 ("database is not currently accepting connections"), and
 * 25006 (read-only transaction: a standby, or default_transaction_read_only).
 */
const POSTGRES_UNAVAILABLE = /^(08|53|57P)|^55000$|^25006$/;
/**
 * SQLite primary result codes (the low byte of an extended code) that mean "cannot write now":
 * the file or its folder is read-only (READONLY_DIRECTORY, READONLY_CANTINIT, …), another
 * process holds the lock past busy_timeout, the disk fails or is full, the file cannot be opened.
 */
export const SQLITE_CANNOT_WRITE: ReadonlyMap<number, string> = new Map([
  [3, "SQLITE_PERM"],
  [5, "SQLITE_BUSY"],
  [6, "SQLITE_LOCKED"],
  [8, "SQLITE_READONLY"],
  [10, "SQLITE_IOERR"],
  [13, "SQLITE_FULL"],
  [14, "SQLITE_CANTOPEN"],
]);

/** Node's socket errors when the database server cannot be reached (the hot store's `pg` pool reports them as they are). */
const NETWORK_ERROR_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

interface ErrorLike {
  readonly name?: unknown;
  readonly severity?: unknown;
  readonly code?: unknown;
  readonly rawCode?: unknown;
  readonly message?: unknown;
  readonly cause?: unknown;
  readonly meta?: { readonly driverAdapterError?: unknown };
}

interface AdapterCause {
  readonly kind?: unknown;
  readonly code?: unknown;
  readonly originalCode?: unknown;
  readonly extendedCode?: unknown;
}

/** The errors to look at: the error, its causes, and the adapter error Prisma puts in `meta` for raw queries (P2010). */
function* chain(err: unknown): Generator<ErrorLike> {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const e = current as ErrorLike;
    yield e;
    const inMeta = e.meta?.driverAdapterError;
    if (typeof inMeta === "object" && inMeta !== null) yield inMeta as ErrorLike;
    current = e.cause;
  }
}

/**
 * The SQLite "cannot write now" code behind an error (e.g. "SQLITE_READONLY"), if any: from the
 * libsql adapter's DriverAdapterError (cause `{ kind: "sqlite", extendedCode }`, or SocketTimeout
 * for SQLITE_BUSY) or from a libsql error that escaped unwrapped (`rawCode`).
 */
export function sqliteCannotWriteCode(err: unknown): string | undefined {
  for (const e of chain(err)) {
    let code: unknown;
    if (e.name === "DriverAdapterError" && typeof e.cause === "object" && e.cause !== null) {
      const cause = e.cause as AdapterCause;
      if (cause.kind === "sqlite") code = cause.extendedCode;
      else if (cause.kind === "SocketTimeout" && cause.originalCode !== undefined) code = Number(cause.originalCode);
    } else if (typeof e.code === "string" && e.code.startsWith("SQLITE_")) {
      code = e.rawCode;
    }
    if (typeof code === "number") {
      const name = SQLITE_CANNOT_WRITE.get(code & 0xff);
      if (name) return name;
    }
  }
  return undefined;
}

/** PostgreSQL's SQLSTATE behind an adapter error or a `pg` error, if any. */
export function postgresSqlState(err: unknown): string | undefined {
  for (const e of chain(err)) {
    // pg's DatabaseError: the server's SQLSTATE and severity, as the hot store receives them.
    if (typeof e.severity === "string" && typeof e.code === "string" && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
    if (e.name === "DriverAdapterError" && typeof e.cause === "object" && e.cause !== null) {
      const cause = e.cause as AdapterCause;
      const sqlState = cause.code ?? cause.originalCode;
      if (cause.kind === "postgres" && typeof sqlState === "string") return sqlState;
    }
  }
  return undefined;
}

export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof StoreWriterUnavailable) return true;
  if (sqliteCannotWriteCode(err)) return true;
  const sqlState = postgresSqlState(err);
  if (sqlState && POSTGRES_UNAVAILABLE.test(sqlState)) return true;
  for (const e of chain(err)) {
    if (e.name === "DriverAdapterError" && typeof e.cause === "object" && e.cause !== null) {
      const cause = e.cause as AdapterCause;
      if (typeof cause.kind === "string" && UNAVAILABLE_KINDS.has(cause.kind)) return true;
    }
    if (typeof e.code === "string" && (PRISMA_UNAVAILABLE_CODES.has(e.code) || NETWORK_ERROR_CODES.has(e.code))) return true;
    // The last one: Prisma's message when the SQLite adapter cannot open the file on connect.
    if (typeof e.message === "string" && /Connection terminated unexpectedly|Can't reach database server|^Failed to connect to database/.test(e.message))
      return true;
  }
  return false;
}
