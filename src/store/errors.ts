// Recognises a database that cannot be reached right now (down, restarting, out of connections,
// network cut) as opposed to a bug: callers answer 503 and retry later instead of a 500.

/** Driver adapter error kinds (Prisma 6 adapters) that say "not reachable now". */
const UNAVAILABLE_KINDS = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections", "TlsConnectionError"]);
/** Prisma's own codes for the same: can't reach, timeout, operations timeout, connection closed, pool timeout. */
const PRISMA_UNAVAILABLE_CODES = new Set(["P1001", "P1002", "P1008", "P1017", "P2024"]);
/**
 * PostgreSQL SQLSTATEs: class 08 (connection exception), 53 (insufficient resources), 57P
 * (shutdown, cannot connect now), and 55000 ("database is not currently accepting connections").
 */
const POSTGRES_UNAVAILABLE = /^(08|53|57P)|^55000$/;

interface ErrorLike {
  readonly name?: unknown;
  readonly code?: unknown;
  readonly message?: unknown;
  readonly cause?: unknown;
}

interface AdapterCause {
  readonly kind?: unknown;
  readonly code?: unknown;
  readonly originalCode?: unknown;
}

export function isDatabaseUnavailable(err: unknown): boolean {
  let current: unknown = err;
  for (let depth = 0; depth < 5 && typeof current === "object" && current !== null; depth++) {
    const e = current as ErrorLike;
    if (e.name === "DriverAdapterError" && typeof e.cause === "object" && e.cause !== null) {
      const cause = e.cause as AdapterCause;
      if (typeof cause.kind === "string" && UNAVAILABLE_KINDS.has(cause.kind)) return true;
      const sqlState = cause.code ?? cause.originalCode;
      if (cause.kind === "postgres" && typeof sqlState === "string" && POSTGRES_UNAVAILABLE.test(sqlState)) return true;
    }
    if (typeof e.code === "string" && PRISMA_UNAVAILABLE_CODES.has(e.code)) return true;
    if (typeof e.message === "string" && /Connection terminated unexpectedly|Can't reach database server/.test(e.message)) return true;
    current = e.cause;
  }
  return false;
}
