// Prisma CLI configuration. Chooses the schema, migrations and driver adapter from DATABASE_URL,
// and runs the JS schema engine so no migrate command downloads a binary (see TOOLCHAIN.md).
import path from "node:path";
import { defineConfig } from "prisma/config";
import { PrismaLibSQL } from "@prisma/adapter-libsql";
import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
import { databaseKindOf } from "./src/config/database-kind.ts";

// Without a DATABASE_URL the CLI falls back to the library engine and tries a download.
process.env.DATABASE_URL ??= "file:./data/broker.db";
const url = process.env.DATABASE_URL;
const db = databaseKindOf(url);
const isPostgres = db === "postgres";

// prisma/orm#27403: the schema engine cannot deserialize PostgreSQL's "char" (18) and name (19)
// columns; report them as text (25). Only the migrate path goes through this pool.
function migratePool(connectionString: string): pg.Pool {
  const pool = new pg.Pool({ connectionString });
  const query = pool.query.bind(pool) as (...args: unknown[]) => Promise<pg.QueryResult | undefined>;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = async (...args: unknown[]) => {
    const result = await query(...args);
    for (const field of result?.fields ?? []) {
      if (field.dataTypeID === 18 || field.dataTypeID === 19) field.dataTypeID = 25;
    }
    return result;
  };
  return pool;
}

export default defineConfig({
  experimental: { adapter: true },
  engine: "js",
  schema: path.join("prisma", db, "schema.prisma"),
  migrations: { path: path.join("prisma", db, "migrations") },
  async adapter() {
    if (isPostgres) return new PrismaPg(migratePool(url));
    return new PrismaLibSQL({ url });
  },
});
