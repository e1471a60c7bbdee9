// Row (g)'s write figures on PostgreSQL, which, unlike CPU time on this machine, do not vary from
// run to run: the WAL a refresh writes, and the share of its updates that stayed heap-only (HOT).
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
 * The share of each table's updates since the database was made that were heap-only. Backends
 * report their counts when idle, at most once a second: the counts are read until two readings a
 * second apart agree (the broker is idle by then), for at most 10 s.
 */
export async function heapOnlyShares(client: pg.Client, tables: readonly string[]): Promise<string> {
  let last = await updateCounts(client, tables);
  for (let attempt = 0; attempt < 10; attempt++) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const now = await updateCounts(client, tables);
    const settled = tables.every((t) => now.get(t)?.updates === last.get(t)?.updates);
    last = now;
    if (settled) break;
  }
  return tables
    .map((t) => {
      const counts = last.get(t);
      return counts && counts.updates > 0 ? `${t} ${((counts.heapOnly / counts.updates) * 100).toFixed(0)}% of ${counts.updates}` : `${t} no updates`;
    })
    .join(", ");
}
