// Migrated databases for tests without running the migration engine each time (it takes over a
// second to start, and tests start dozens of brokers): the migrations are applied once to a
// template — a SQLite file in the temp folder, a template database on the suite's PostgreSQL
// server — named by a hash of the migrations, and each test gets a copy.
import { createHash, randomBytes } from "node:crypto";
import { copyFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "libsql";
import type pg from "pg";
import { migrateDatabase, projectRoot } from "../../src/store/migrate.ts";

function migrationsHash(kind: "sqlite" | "postgres"): string {
  const folder = path.join(projectRoot, "prisma", kind, "migrations");
  const hash = createHash("sha256");
  for (const name of readdirSync(folder).sort()) {
    const file = path.join(folder, name, "migration.sql");
    if (existsSync(file)) hash.update(name).update(readFileSync(file));
  }
  return hash.digest("hex").slice(0, 16);
}

/** Copies a migrated SQLite database to `file` (which must not exist yet). */
export async function copyMigratedSqlite(file: string): Promise<void> {
  const template = path.join(tmpdir(), `mab-template-${migrationsHash("sqlite")}.db`);
  if (!existsSync(template)) {
    // Built beside it and renamed: a worker that races this one sees a whole file or none.
    const building = `${template}.${process.pid}.${randomBytes(4).toString("hex")}`;
    await migrateDatabase(`file:${building}`);
    // Everything into the main file, so one file is the whole database.
    const db = new Database(building);
    db.prepare("PRAGMA wal_checkpoint(TRUNCATE)").get();
    db.prepare("PRAGMA journal_mode = DELETE").get();
    db.close();
    renameSync(building, template);
    for (const suffix of ["-wal", "-shm", "-journal"]) rmSync(`${building}${suffix}`, { force: true });
  }
  copyFileSync(template, file);
}

async function withAdmin<T>(base: string, run: (client: pg.Client) => Promise<T>): Promise<T> {
  // Loaded here: every test that starts a SQLite broker imports this file.
  const { default: pgDriver } = await import("pg");
  const client = new pgDriver.Client({ connectionString: `${base}/postgres` });
  await client.connect();
  try {
    return await run(client);
  } finally {
    await client.end();
  }
}

/** The name of a migrated template database on the server at `base`, made on first use. */
export async function migratedPostgresTemplate(base: string): Promise<string> {
  const name = `mab_template_${migrationsHash("postgres")}`;
  await withAdmin(base, async (admin) => {
    // One builder at a time across Jest workers; the others wait, then find it made.
    await admin.query("SELECT pg_advisory_lock(471117)");
    try {
      const found = await admin.query("SELECT 1 FROM pg_database WHERE datname = $1", [name]);
      if (found.rowCount) return;
      const building = `${name}_building`;
      await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
      await admin.query(`CREATE DATABASE ${building}`);
      await migrateDatabase(`${base}/${building}`);
      // The migration engine may still hold a connection for a moment; a template needs none.
      await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`).catch(async () => {
        await admin.query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", [building]);
        await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
      });
    } finally {
      await admin.query("SELECT pg_advisory_unlock(471117)");
    }
  });
  return name;
}
