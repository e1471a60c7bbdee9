import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
// @ts-expect-error plain ESM script without types
import { derivePostgresSchema, findSchemaDrift, postgresSchemaPath, sqliteSchemaPath } from "../../scripts/sync-schemas.mjs";

const sqlite = readFileSync(sqliteSchemaPath as string, "utf8");
const postgres = readFileSync(postgresSchemaPath as string, "utf8");

describe("the two Prisma schemas", () => {
  it("are in sync: prisma/postgres is exactly what prisma/sqlite derives", () => {
    expect(findSchemaDrift(sqlite, postgres)).toBeNull();
  });

  it("differ only in provider and output", () => {
    const derived = (derivePostgresSchema as (s: string) => string)(sqlite);
    expect(derived).toContain('provider = "postgresql"');
    expect(derived).toContain("generated/postgres");
  });

  it("a deliberate drift is caught, with the line and the fix", () => {
    const drifted = postgres.replace("model Grant {", "model Grant {\n  extra String?");
    const drift = findSchemaDrift(sqlite, drifted) as string;
    expect(drift).toMatch(/line \d+ differs/);
    expect(drift).toContain("npm run schema:sync");
    const edited = sqlite.replace("scope                   String?", "scope                   String");
    expect(findSchemaDrift(edited, postgres)).not.toBeNull();
  });
});
