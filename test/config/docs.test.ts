// The README's configuration table and .env.example are what operators read: every variable the
// broker reads must be in both, and neither may list one it does not read.
import { describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../support/spawn.ts";

const read = (file: string) => readFileSync(path.join(projectRoot, file), "utf8");
const variablesIn = (text: string, pattern: RegExp) => new Set([...text.matchAll(pattern)].map((m) => m[1]!));

/** Every variable the configuration modules read, by either of their spellings. */
const readByBroker = new Set(
  ["src/config.ts", "src/access-policy-config.ts", "src/client-interop-config.ts", "src/stdio-server-config.ts"].flatMap((file) => [
    ...variablesIn(read(file), /(?:env,\s*"|env\.)([A-Z][A-Z0-9_]+)/g),
  ]),
);

describe("configuration documentation", () => {
  it("finds the variables the broker reads", () => {
    expect(readByBroker.size).toBeGreaterThan(20);
    expect(readByBroker).toContain("DATABASE_URL");
    expect(readByBroker).toContain("ALLOWED_USERS");
  });

  it("the README's table lists exactly the variables the broker reads", () => {
    const table = variablesIn(read("README.md"), /^\| `([A-Z][A-Z0-9_]+)`/gm);
    // A row may name two variables (`UPSTREAM_CLIENT_ID`, `UPSTREAM_CLIENT_SECRET`).
    for (const m of read("README.md").matchAll(/^\| `[A-Z_]+`, `([A-Z][A-Z0-9_]+)`/gm)) table.add(m[1]!);
    expect([...table].sort()).toEqual([...readByBroker].sort());
  });

  it(".env.example documents every variable the broker reads, and no other", () => {
    const example = variablesIn(read(".env.example"), /^#? ?([A-Z][A-Z0-9_]+)=/gm);
    expect([...example].sort()).toEqual([...readByBroker].sort());
  });
});
