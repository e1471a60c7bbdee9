// Applies pending migrations with the Prisma CLI (JS schema engine, nothing downloaded), for
// `npm start` and `mcp-auth-broker migrate`.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../project-root.ts";
import { MigrationError } from "./migration-error.ts";
import { openDatabase, prepareSqliteFolder, sqliteFilePath, type Database } from "./db.ts";
import { databaseKindOf } from "../config/database-kind.ts";
import { firstLine } from "../lib/error-text.ts";
import { DatabaseNotWritableError, sqliteFileProblem } from "./writability.ts";

export { projectRoot };

export interface MigrateResult {
  readonly applied: string[];
  readonly output: string;
}

export { MigrationError };

export async function migrateDatabase(databaseUrl: string, cwd: string = process.cwd()): Promise<MigrateResult> {
  // The CLI resolves file: URLs against its cwd (the project root); pass an absolute path so the
  // broker's cwd decides, as it does for the running client.
  const file = /^file:/i.test(databaseUrl) ? sqliteFilePath(databaseUrl, cwd) : undefined;
  if (file) {
    // Migrations are the first write: a read-only file or folder is named here, with what to do,
    // rather than as the migration engine's "attempt to write a readonly database".
    prepareSqliteFolder(file);
    const problem = sqliteFileProblem(file);
    if (problem) throw new DatabaseNotWritableError(problem.detail);
  }
  const url = file ? `file:${file}` : databaseUrl;
  // Most starts find nothing to apply: a query answers that in milliseconds, where the migration
  // engine takes over a second to start. It runs only when something is pending (or the check
  // itself fails, so that its error is the engine's clear one).
  if ((!file || existsSync(file)) && (await nothingPending(databaseUrl, cwd))) return { applied: [], output: "No pending migrations to apply." };
  // Where npm put the Prisma CLI: inside this package's node_modules in a checkout, beside it
  // when the package is installed as a dependency.
  const cli = createRequire(import.meta.url).resolve("prisma/build/index.js");
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn(process.execPath, [cli, "migrate", "deploy"], {
      cwd: projectRoot,
      // CHECKPOINT_DISABLE: otherwise each run starts Prisma's checkpoint child, which reports to
      // checkpoint.prisma.io: a broker must not phone home, nor spend ~2 s of CPU on it.
      env: { ...process.env, DATABASE_URL: url, PRISMA_HIDE_UPDATE_MESSAGE: "1", CHECKPOINT_DISABLE: "1", NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let text = "";
    let finished = false;
    // On PostgreSQL the CLI keeps its pool open ~10 s after it is done (the adapter is never
    // disposed); once it has said the migrations are applied, stop waiting for it.
    child.stdout.on("data", (d: Buffer) => {
      text += d.toString();
      if (!finished && /All migrations have been successfully applied|No pending migrations to apply/.test(text)) {
        finished = true;
        setTimeout(() => child.kill("SIGTERM"), 100).unref();
      }
    });
    child.stderr.on("data", (d: Buffer) => (text += d.toString()));
    child.on("error", reject);
    child.on("close", (code) => {
      if (code === 0 || finished) resolve(text);
      else {
        const reason = text.split("\n").find((l) => /^Error|P\d{4}|Can't reach/i.test(l.trim())) ?? text.trim().split("\n").pop();
        reject(new MigrationError(`database migration failed: ${reason?.trim() ?? "unknown error"}`));
      }
    });
  });
  const applied = [...output.matchAll(/└─ (\S+)\//g)].map((m) => m[1]!).filter((n) => /^\d{14}_/.test(n));
  return { applied, output };
}

async function nothingPending(databaseUrl: string, cwd: string): Promise<boolean> {
  let database: Database | undefined;
  try {
    database = await openDatabase(databaseUrl, cwd);
    return (await pendingMigrations(database)).length === 0;
  } catch (err) {
    // A PostgreSQL server that cannot be reached fails the engine too, after seconds of start-up:
    // say so now. Any other failure is left to the engine, whose error is the clearer one.
    if (databaseKindOf(databaseUrl) === "postgres") {
      const { tryConnect } = await import("./database-failure.ts");
      const unreachable = await tryConnect(databaseUrl, 5000);
      if (unreachable !== undefined) throw new MigrationError(`database migration failed: ${firstLine(err)}`);
    }
    return false;
  } finally {
    await database?.close();
  }
}

/** Migrations checked in for this kind of database that the database has not applied yet. */
export async function pendingMigrations(database: Database): Promise<string[]> {
  const folder = path.join(projectRoot, "prisma", database.kind, "migrations");
  const known = readdirSync(folder, { withFileTypes: true })
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort();
  let applied: Set<string>;
  try {
    const rows = await database.db.$queryRawUnsafe<Array<{ migration_name: string }>>(
      `SELECT migration_name FROM "_prisma_migrations" WHERE finished_at IS NOT NULL AND rolled_back_at IS NULL`,
    );
    applied = new Set(rows.map((r) => r.migration_name));
  } catch (err) {
    // No migrations table: nothing applied yet (an unreachable database fails on its own, below).
    if (!/_prisma_migrations/.test((err as Error).message)) throw err;
    applied = new Set();
  }
  return known.filter((name) => !applied.has(name));
}
