// Derives the PostgreSQL Prisma schema from the SQLite one, so the two can never drift apart:
// they differ only in the datasource provider and the generated client's output folder.
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const sqliteSchemaPath = path.join(root, "prisma/sqlite/schema.prisma");
export const postgresSchemaPath = path.join(root, "prisma/postgres/schema.prisma");

const HEADER = "// GENERATED from prisma/sqlite/schema.prisma by `npm run schema:sync`: do not edit by hand.\n";

export function derivePostgresSchema(sqliteText) {
  const replaced = sqliteText
    .replace(/provider\s*=\s*"sqlite"/, 'provider = "postgresql"')
    .replace('output     = "../../src/store/generated/sqlite"', 'output     = "../../src/store/generated/postgres"');
  if (!replaced.includes('provider = "postgresql"') || !replaced.includes("generated/postgres")) {
    throw new Error("prisma/sqlite/schema.prisma no longer has the expected provider/output lines");
  }
  return HEADER + replaced;
}

/** Returns null when the PostgreSQL schema is exactly what the SQLite schema derives, else a description. */
export function findSchemaDrift(sqliteText, postgresText) {
  const expected = derivePostgresSchema(sqliteText);
  if (expected === postgresText) return null;
  const a = expected.split("\n");
  const b = postgresText.split("\n");
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      return `prisma/postgres/schema.prisma line ${i + 1} differs from what prisma/sqlite/schema.prisma derives: expected ${JSON.stringify(a[i] ?? "")}, found ${JSON.stringify(b[i] ?? "")}. Run \`npm run schema:sync\`.`;
    }
  }
  return "schemas differ";
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const sqlite = readFileSync(sqliteSchemaPath, "utf8");
  if (process.argv.includes("--check")) {
    const drift = findSchemaDrift(sqlite, readFileSync(postgresSchemaPath, "utf8"));
    if (drift) {
      console.error(drift);
      process.exit(1);
    }
  } else {
    writeFileSync(postgresSchemaPath, derivePostgresSchema(sqlite));
    console.log("prisma/postgres/schema.prisma regenerated");
  }
}
