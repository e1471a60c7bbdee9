// A fresh, empty PostgreSQL database per test file on the suite's server.
import { randomBytes } from "node:crypto";
import pg from "pg";

export const postgresAvailable = Boolean(process.env.MAB_TEST_POSTGRES_URL);

export async function createPostgresDatabase(): Promise<{ url: string; drop(): Promise<void> }> {
  const base = process.env.MAB_TEST_POSTGRES_URL;
  if (!base) throw new Error("no PostgreSQL server for tests");
  const name = `mab_${randomBytes(6).toString("hex")}`;
  const admin = new pg.Client({ connectionString: `${base}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  return {
    url: `${base}/${name}`,
    async drop() {
      const c = new pg.Client({ connectionString: `${base}/postgres` });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
