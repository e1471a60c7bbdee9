// The MCP session binding the broker uses: in the database, so that every instance knows who owns
// a session, with what each instance has seen kept in memory (no query per request). On SQLite
// and PostgreSQL; two bindings over one database stand for two broker instances.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { migrateDatabase } from "../../src/store/migrate.ts";
import { openDatabase, type Database } from "../../src/store/db.ts";
import { cachedSessionBinding } from "../../src/gateway/database-session-binding.ts";
import { createMcpSessionStore } from "../../src/store/mcp-sessions.ts";
import { databaseTargets } from "../support/database-targets.ts";

const binding = (database: Database) => cachedSessionBinding(createMcpSessionStore(database));

describe.each(databaseTargets("MCP session binding tests"))("MCP session binding in the database ($name)", (target) => {
  let a: Database;
  let b: Database;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const t = await target.setup();
    cleanup = t.cleanup;
    await migrateDatabase(t.url);
    [a, b] = await Promise.all([openDatabase(t.url), openDatabase(t.url)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    await cleanup();
  });

  it("a session bound on one instance is owned there on the other; the first claim wins", async () => {
    const onA = binding(a);
    const onB = binding(b);
    const session = randomUUID();
    expect(await onB.ownerOf(session)).toBeUndefined();
    expect(await onA.claim(session, "github:1")).toBe("github:1");
    expect(await onB.ownerOf(session)).toBe("github:1");
    expect(await onB.claim(session, "github:2")).toBe("github:1");
  });

  it("concurrent claims of one session on both instances agree on a single owner", async () => {
    const onA = binding(a);
    const onB = binding(b);
    for (let round = 0; round < 10; round++) {
      const session = randomUUID();
      const owners = await Promise.all([onA.claim(session, "alice"), onB.claim(session, "bob"), onA.claim(session, "carol"), onB.claim(session, "dave")]);
      expect(new Set(owners).size).toBe(1);
      expect(await onA.ownerOf(session)).toBe(owners[0]);
      expect(await onB.ownerOf(session)).toBe(owners[0]);
    }
  });

  it("answers a known session from memory: no query per request", async () => {
    const onB = binding(b);
    const session = randomUUID();
    await binding(a).claim(session, "github:7");
    const before = b.queryCount();
    const owners = await Promise.all(Array.from({ length: 50 }, () => onB.ownerOf(session)));
    expect(new Set(owners)).toEqual(new Set(["github:7"]));
    // One lookup shared by the 50 concurrent first requests, then memory.
    expect(b.queryCount() - before).toBe(1);
    await onB.ownerOf(session);
    expect(b.queryCount() - before).toBe(1);
  });

  it("stores only a hash of the session id; release forgets it everywhere it was not yet seen", async () => {
    const onA = binding(a);
    const session = randomUUID();
    await onA.claim(session, "github:9");
    const rows = await a.db.mcpSession.findMany({ where: { owner: "github:9" } });
    expect(rows).toHaveLength(1);
    expect(rows[0]!.sessionHash).not.toContain(session);
    await onA.release(session);
    expect(await onA.ownerOf(session)).toBeUndefined();
    expect(await binding(b).ownerOf(session)).toBeUndefined();
  });
});
