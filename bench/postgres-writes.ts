// Row (g)'s write figures on PostgreSQL, which, unlike CPU time on this machine, do not vary from
// run to run: the WAL a refresh writes, how many refreshes share one WAL flush, and the share of
// its updates that stayed heap-only (HOT).
// An UPDATE that changes no indexed column, and finds room on its row's page, writes no index
// entry; any other writes a new entry in every index of the table. So the figures move when the
// schema's indexes or the tables' fill factor change, whatever the machine's load.
import type pg from "pg";

/** The server's WAL position in bytes: its growth over some refreshes is what they wrote. */
export async function walPosition(client: pg.Client): Promise<number> {
  const { rows } = await client.query<{ bytes: string }>(`SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::text AS bytes`);
  return Number(rows[0]!.bytes);
}

interface UpdateCounts {
  readonly updates: number;
  readonly heapOnly: number;
}

async function updateCounts(client: pg.Client, tables: readonly string[]): Promise<Map<string, UpdateCounts>> {
  const { rows } = await client.query<{ relname: string; n_tup_upd: string; n_tup_hot_upd: string }>(
    `SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = ANY($1)`,
    [tables],
  );
  return new Map(rows.map((r) => [r.relname, { updates: Number(r.n_tup_upd), heapOnly: Number(r.n_tup_hot_upd) }]));
}

/**
 * Backends report their counts when idle, at most once a second: `read` is called until two
 * readings a second apart agree (the broker is idle by then), for at most 10 s.
 */
async function settledReading<T>(read: () => Promise<T>, same: (a: T, b: T) => boolean): Promise<T> {
  let last = await read();
  for (let attempt = 0; attempt < 10; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const now = await read();
    const settled = same(now, last);
    last = now;
    if (settled) break;
  }
  return last;
}

/** The share of each table's updates since the database was made that were heap-only. */
export async function heapOnlyShares(client: pg.Client, tables: readonly string[]): Promise<string> {
  const last = await settledReading(
    () => updateCounts(client, tables),
    (a, b) => tables.every((t) => a.get(t)?.updates === b.get(t)?.updates),
  );
  return tables
    .map((t) => {
      const counts = last.get(t);
      return counts && counts.updates > 0 ? `${t} ${((counts.heapOnly / counts.updates) * 100).toFixed(0)}% of ${counts.updates}` : `${t} no updates`;
    })
    .join(", ");
}

/** WAL flushes so far (an fsync of the WAL by any backend or the WAL writer), and refresh tokens. */
export interface FlushCount {
  readonly flushes: number;
  readonly refreshTokens: number;
}

async function flushCount(client: pg.Client): Promise<FlushCount> {
  const { rows } = await client.query<{ flushes: string; tokens: string }>(
    `SELECT (SELECT "wal_sync" FROM "pg_stat_wal")::text AS flushes, (SELECT count(*) FROM "RefreshToken")::text AS tokens`,
  );
  return { flushes: Number(rows[0]!.flushes), refreshTokens: Number(rows[0]!.tokens) };
}

/** The count now, once the backends have reported theirs (see settledReading). */
export const settledFlushCount = (client: pg.Client): Promise<FlushCount> =>
  settledReading(
    () => flushCount(client),
    (a, b) => a.flushes === b.flushes,
  );

/**
 * How many refresh tokens each WAL flush made durable between two counts: what the broker's group
 * commit (src/store/pg-group-commit.ts) and PostgreSQL's own sharing of a flush among the commits
 * waiting for it did together. One flush per token would put an fsync on every refresh.
 */
export function tokensPerFlush(before: FlushCount, after: FlushCount): string {
  const flushes = after.flushes - before.flushes;
  const tokens = after.refreshTokens - before.refreshTokens;
  return flushes > 0
    ? `${(tokens / flushes).toFixed(1)} refresh tokens per WAL flush (${tokens} tokens, ${flushes} flushes)`
    : `no WAL flush counted (${tokens} tokens)`;
}
