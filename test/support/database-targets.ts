// The databases a storage-level test runs against: a SQLite file in a temp folder always, and a
// fresh database on the suite's PostgreSQL server when its binaries are installed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createPostgresDatabase, postgresAvailable } from "./pg-database.ts";
import { copyMigratedSqlite } from "./template-db.ts";

export interface DatabaseTarget {
  readonly name: "sqlite" | "postgres";
  setup(): Promise<{ url: string; cleanup(): Promise<void> }>;
}

/** `migrated` (default true): the databases come with every migration applied. */
export function databaseTargets(what: string, options: { migrated?: boolean } = {}): DatabaseTarget[] {
  const migrated = options.migrated ?? true;
  const targets: DatabaseTarget[] = [
    {
      name: "sqlite",
      async setup() {
        const dir = mkdtempSync(path.join(tmpdir(), "mab-store-"));
        const file = path.join(dir, "broker.db");
        if (migrated) await copyMigratedSqlite(file);
        return { url: `file:${file}`, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
      },
    },
  ];
  if (postgresAvailable) {
    targets.push({
      name: "postgres",
      async setup() {
        const db = await createPostgresDatabase({ migrated });
        return { url: db.url, cleanup: db.drop };
      },
    });
  } else {
    process.stdout.write(`[notice] PostgreSQL not available: ${what} run on SQLite only\n`);
  }
  return targets;
}
