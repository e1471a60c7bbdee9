// Why the database cannot be used, in words an operator can act on. Prisma's own errors often say
// only "Can't reach database server" (or nothing on their first line); for PostgreSQL a direct
// connection attempt with `pg` gives the real cause: DNS, refused, timeout, TLS, credentials.
import pg from "pg";
import { describeNetworkFailure } from "../lib/network-failure.ts";
import { databaseKindOf } from "../config/database-kind.ts";
import { firstLine } from "../lib/error-text.ts";

const POSTGRES_CODES: Record<string, string> = {
  "28P01": "PostgreSQL refused the user name or password in DATABASE_URL; correct them",
  "28000": "PostgreSQL refused this user from this host (pg_hba.conf); allow it, or use another user in DATABASE_URL",
  "3D000": "the database named in DATABASE_URL does not exist on that server; create it (createdb <name>) or correct the name",
  "53300": "PostgreSQL has no free connection slots; raise max_connections or stop idle clients",
  "57P03": "PostgreSQL is starting up or shutting down; try again shortly",
};

/** A connection attempt to PostgreSQL at `url`: the error it fails with, or undefined. */
export async function tryConnect(url: string, timeoutMs: number): Promise<unknown> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: timeoutMs });
  try {
    await client.connect();
    return undefined;
  } catch (err) {
    return err;
  } finally {
    await client.end().catch(() => undefined);
  }
}

/**
 * What stops the broker from using the database at `url`, given the error it got: for PostgreSQL
 * the cause found by connecting directly, with what to change.
 */
export async function describeDatabaseFailure(url: string, err: unknown, timeoutMs = 5000): Promise<string> {
  if (databaseKindOf(url) !== "postgres") return firstLine(err);
  const direct = await tryConnect(url, timeoutMs);
  if (direct === undefined) return firstLine(err);
  const code = (direct as { code?: string }).code;
  if (code && POSTGRES_CODES[code]) return POSTGRES_CODES[code];
  return describeNetworkFailure(direct, "PostgreSQL", "DATABASE_URL") ?? firstLine(direct);
}
