// The databases a storage-level test runs against: a SQLite file in a temp folder always, and a
// fresh database on the suite's PostgreSQL server when its binaries are installed.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { createPostgresDatabase, postgresAvailable } from "./pg-database.ts";

export interface DatabaseTarget {
  readonly name: "sqlite" | "postgres";
  setup(): Promise<{ url: string; cleanup(): Promise<void> }>;
}

export function databaseTargets(what: string): DatabaseTarget[] {
  const targets: DatabaseTarget[] = [
    {
      name: "sqlite",
      async setup() {
        const dir = mkdtempSync(path.join(tmpdir(), "mab-store-"));
        return { url: `file:${path.join(dir, "broker.db")}`, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
      },
    },
  ];
  if (postgresAvailable) {
    targets.push({
      name: "postgres",
      async setup() {
        const db = await createPostgresDatabase();
        return { url: db.url, cleanup: db.drop };
      },
    });
  } else {
    process.stdout.write(`[notice] PostgreSQL not available: ${what} run on SQLite only\n`);
  }
  return targets;
}
