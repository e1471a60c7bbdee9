// The README's configuration table and .env.example are what operators read: every variable the
// broker reads must be in both, and neither may list one it does not read.
import { describe, expect, it } from "@jest/globals";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../support/spawn.ts";
import { FILE_VARIABLES, KNOWN_VARIABLES } from "../../src/config/sources.ts";

const read = (file: string) => readFileSync(path.join(projectRoot, file), "utf8");
const variablesIn = (text: string, pattern: RegExp) => new Set([...text.matchAll(pattern)].map((m) => m[1]!));

/** Every variable the configuration modules read, by either of their spellings. */
const readByBroker = new Set(
  readdirSync(path.join(projectRoot, "src/config"))
    .filter((file) => file.endsWith(".ts"))
    .flatMap((file) => [...variablesIn(read(`src/config/${file}`), /(?:env,\s*"|env\.)([A-Z][A-Z0-9_]+)/g)]),
);
// The secrets may also come from files.
for (const name of FILE_VARIABLES) readByBroker.add(`${name}_FILE`);

describe("configuration documentation", () => {
  it("finds the variables the broker reads", () => {
    expect(readByBroker.size).toBeGreaterThan(20);
    expect(readByBroker).toContain("DATABASE_URL");
    expect(readByBroker).toContain("ALLOWED_USERS");
  });

  it("the list that catches misspelt variables knows exactly the variables the broker reads", () => {
    expect([...KNOWN_VARIABLES].sort()).toEqual([...readByBroker].sort());
  });

  it("the README's table lists exactly the variables the broker reads", () => {
    // A row may name several variables in its first cell (`UPSTREAM_CLIENT_ID`, `UPSTREAM_CLIENT_SECRET`).
    const firstCells = [...read("README.md").matchAll(/^\| (`[A-Z][A-Z0-9_]+`(?:, `[A-Z][A-Z0-9_]+`)*) \|/gm)].map((m) => m[1]!);
    const table = new Set(firstCells.flatMap((cell) => [...cell.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!)));
    expect([...table].sort()).toEqual([...readByBroker].sort());
  });

  it(".env.example documents every variable the broker reads, and no other", () => {
    const example = variablesIn(read(".env.example"), /^#? ?([A-Z][A-Z0-9_]+)=/gm);
    expect([...example].sort()).toEqual([...readByBroker].sort());
  });
});
