// A fresh, empty PostgreSQL database per test file on the suite's server.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { migratedPostgresTemplate } from "./template-db.ts";

export const postgresAvailable = Boolean(process.env.MAB_TEST_POSTGRES_URL);

export interface TestPostgresDatabase {
  readonly url: string;
  /** Refuses new connections and cuts the open ones: the database is "down" for its users. */
  goDown(): Promise<void>;
  /** Accepts connections again. */
  comeBack(): Promise<void>;
  drop(): Promise<void>;
}

async function adminQuery(base: string, sql: string, params: unknown[] = []): Promise<void> {
  const c = new pg.Client({ connectionString: `${base}/postgres` });
  await c.connect();
  try {
    await c.query(sql, params);
  } finally {
    await c.end();
  }
}

/** A fresh database: migrated (a copy of the migrated template) unless `migrated: false`. */
export async function createPostgresDatabase(options: { migrated?: boolean } = {}): Promise<TestPostgresDatabase> {
  const base = process.env.MAB_TEST_POSTGRES_URL;
  if (!base) throw new Error("no PostgreSQL server for tests");
  const name = `mab_${randomBytes(6).toString("hex")}`;
  const template = (options.migrated ?? true) ? await migratedPostgresTemplate(base) : undefined;
  await adminQuery(base, `CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ""}`);
  return {
    url: `${base}/${name}`,
    async goDown() {
      await adminQuery(base, `ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS false`);
      await adminQuery(base, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, [name]);
    },
    comeBack: () => adminQuery(base, `ALTER DATABASE ${name} WITH ALLOW_CONNECTIONS true`),
    drop: () => adminQuery(base, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}
