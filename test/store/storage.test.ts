// Migrations from empty and a round trip of every model, on SQLite always and on PostgreSQL when
// the suite's server is available: same code, same behaviour.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../../src/project-root.ts";
import { migrateDatabase, pendingMigrations } from "../../src/store/migrate.ts";
import { openDatabase, type Database } from "../../src/store/db.ts";
import { databaseTargets } from "../support/database-targets.ts";

describe.each(databaseTargets("migration tests", { migrated: false }))("migrations on $name", (target) => {
  let url: string;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    ({ url, cleanup } = await target.setup());
  });
  afterAll(async () => cleanup());

  it("applies every migration to an empty database, and is idempotent", async () => {
    const empty = await openDatabase(url);
    const pendingBefore = await pendingMigrations(empty).finally(() => empty.close());
    expect(pendingBefore).toContain("20261122140000_init");
    const first = await migrateDatabase(url);
    expect(first.applied).toEqual(pendingBefore);
    expect(first.applied).toContain("20261122140000_init");
    const second = await migrateDatabase(url);
    expect(second.applied).toEqual([]);
    const database = await openDatabase(url);
    try {
      expect(database.kind).toBe(target.name);
      expect(await pendingMigrations(database)).toEqual([]);
      // The migrations leave exactly the indexes the schema declares: a schema edit without its
      // migration (or the reverse) fails here, whichever database.
      const schema = readFileSync(path.join(projectRoot, "prisma", target.name, "schema.prisma"), "utf8");
      // PostgreSQL cuts identifiers at 63 bytes.
      expect(await databaseIndexes(database)).toEqual(declaredIndexes(schema, target.name === "postgres" ? 63 : Infinity));
    } finally {
      await database.close();
    }
  });
});

/** The names Prisma gives the indexes a schema declares (`Model_a_b_idx`, `Model_a_key`), sorted. */
function declaredIndexes(schema: string, maxLength: number): string[] {
  const names: string[] = [];
  for (const [, model, body] of schema.matchAll(/^model (\w+) \{\n([\s\S]*?)^\}/gm)) {
    for (const line of body!.split("\n").map((l) => l.trim())) {
      const block = /^@@(index|unique)\(\[([^\]]+)\]/.exec(line);
      if (block)
        names.push(
          `${model}_${block[2]!
            .split(",")
            .map((f) => f.trim())
            .join("_")}_${block[1] === "index" ? "idx" : "key"}`,
        );
      else if (/^\w+\s+\S+.*\s@unique\b/.test(line)) names.push(`${model}_${line.split(/\s+/)[0]}_key`);
    }
  }
  return names.map((name) => name.slice(0, maxLength)).sort();
}

/** The indexes of the database's tables other than primary keys, sorted (Prisma's own table excluded). */
async function databaseIndexes(database: Database): Promise<string[]> {
  const rows =
    database.kind === "sqlite"
      ? await database.db.$queryRawUnsafe<{ name: string }[]>(
          `SELECT "name" FROM sqlite_master WHERE "type" = 'index' AND "name" NOT LIKE 'sqlite_autoindex_%' AND "tbl_name" <> '_prisma_migrations'`,
        )
      : await database.db.$queryRawUnsafe<{ name: string }[]>(
          `SELECT "indexname"::text AS "name" FROM pg_indexes WHERE "schemaname" = current_schema() AND "indexname" NOT LIKE '%_pkey' AND "tablename" <> '_prisma_migrations'`,
        );
  return rows.map((r) => r.name).sort();
}

describe.each(databaseTargets("storage tests"))("storage on $name", (target) => {
  let database: Database;
  let cleanup: () => Promise<void>;

  beforeAll(async () => {
    const t = await target.setup();
    cleanup = t.cleanup;
    database = await openDatabase(t.url);
  });

  afterAll(async () => {
    await database?.close();
    await cleanup();
  });

  it("round-trips every model", async () => {
    const { db } = database;
    const now = new Date();
    const later = new Date(now.getTime() + 60_000);
    const clientId = `c_${randomUUID()}`;
    await db.client.create({
      data: {
        id: clientId,
        secretHash: "h",
        secretPrefix: "mab_cs_x",
        redirectUris: JSON.stringify(["http://127.0.0.1:3333/cb"]),
        tokenEndpointAuthMethod: "none",
        grantTypes: JSON.stringify(["authorization_code", "refresh_token"]),
        responseTypes: JSON.stringify(["code"]),
        clientName: "Ünïcode client ✓",
        registrationType: "dynamic",
      },
    });
    const client = await db.client.findUniqueOrThrow({ where: { id: clientId } });
    expect(client.clientName).toBe("Ünïcode client ✓");
    expect(JSON.parse(client.redirectUris)).toEqual(["http://127.0.0.1:3333/cb"]);

    const txId = randomUUID();
    await db.authTransaction.create({
      data: {
        id: txId,
        clientId,
        redirectUri: "http://127.0.0.1:3333/cb",
        codeChallenge: "c".repeat(43),
        codeChallengeMethod: "S256",
        resource: "http://x/mcp",
        scope: "mcp",
        state: "s",
        browserSessionId: "b",
        status: "pending",
        upstreamState: `st_${txId}`,
        expiresAt: later,
      },
    });
    expect((await db.authTransaction.findUniqueOrThrow({ where: { upstreamState: `st_${txId}` } })).id).toBe(txId);

    await db.consent.create({
      data: { id: randomUUID(), browserSessionId: "b", clientId, redirectUri: "http://127.0.0.1:3333/cb", scope: "mcp", expiresAt: later },
    });
    expect(await db.consent.count({ where: { clientId } })).toBe(1);

    const sessionId = randomUUID();
    await db.upstreamSession.create({
      data: {
        id: sessionId,
        provider: "github",
        subject: "github:1",
        login: "octocat",
        profile: "{}",
        accessTokenEnc: "jwe",
        lastCheckedAt: now,
        status: "active",
      },
    });
    const grantId = randomUUID();
    await db.grant.create({
      data: {
        id: grantId,
        clientId,
        upstreamSessionId: sessionId,
        subject: "github:1",
        kind: "authorization_code",
        resource: "http://x/mcp",
        scope: "mcp",
        lastUsedAt: now,
        idleExpiresAt: later,
        absoluteExpiresAt: later,
      },
    });
    await db.authorizationCode.create({
      data: {
        id: randomUUID(),
        codeHash: `code_${grantId}`,
        grantId,
        clientId,
        redirectUri: "http://127.0.0.1:3333/cb",
        codeChallenge: "c",
        resource: "http://x/mcp",
        scope: "mcp",
        expiresAt: later,
      },
    });
    const rt1 = randomUUID();
    const rt2 = randomUUID();
    await db.refreshToken.create({
      data: { id: rt1, tokenHash: `rt1_${grantId}`, prefix: "mab_rt_", grantId, clientId, resource: "http://x/mcp", scope: "mcp", expiresAt: later },
    });
    await db.refreshToken.create({
      data: {
        id: rt2,
        tokenHash: `rt2_${grantId}`,
        prefix: "mab_rt_",
        grantId,
        clientId,
        resource: "http://x/mcp",
        scope: "mcp",
        parentId: rt1,
        expiresAt: later,
      },
    });
    await db.refreshToken.update({ where: { id: rt1 }, data: { successorId: rt2, consumedAt: now, graceUntil: later } });
    await db.accessToken.create({
      data: {
        id: randomUUID(),
        tokenHash: `at_${grantId}`,
        prefix: "mab_at_",
        grantId,
        clientId,
        resource: "http://x/mcp",
        scope: "mcp",
        refreshTokenId: rt2,
        expiresAt: later,
      },
    });
    await db.auditEvent.create({ data: { id: randomUUID(), type: "grant.revoked", grantId, detail: JSON.stringify({ reason: "test" }) } });

    const grant = await db.grant.findUniqueOrThrow({
      where: { id: grantId },
      include: { codes: true, upstreamSession: true, client: true },
    });
    expect(grant.codes).toHaveLength(1);
    expect(await db.accessToken.count({ where: { grantId } })).toBe(1);
    expect(await db.refreshToken.count({ where: { grantId } })).toBe(2);
    expect(grant.upstreamSession?.login).toBe("octocat");
    expect(grant.client.id).toBe(clientId);
    expect(grant.idleExpiresAt.getTime()).toBe(later.getTime());
    const rotated = await db.refreshToken.findUniqueOrThrow({ where: { id: rt1 } });
    expect(rotated.successorId).toBe(rt2);
    expect(await db.auditEvent.count({ where: { grantId } })).toBe(1);

    // Conditional claims (the basis of single-use codes) report how many rows changed.
    const first = await db.authorizationCode.updateMany({ where: { codeHash: `code_${grantId}`, consumedAt: null }, data: { consumedAt: now } });
    const second = await db.authorizationCode.updateMany({ where: { codeHash: `code_${grantId}`, consumedAt: null }, data: { consumedAt: now } });
    expect([first.count, second.count]).toEqual([1, 0]);

    // Removing a client removes everything that hangs on it.
    await db.client.delete({ where: { id: clientId } });
    expect(await db.grant.count({ where: { id: grantId } })).toBe(0);
    expect(await db.authorizationCode.count({ where: { grantId } })).toBe(0);
    // Tokens are no relation of their grant (prisma/sqlite/schema.prisma): ClientRegistry.remove
    // deletes them (test/cli), and one left behind is refused (test/store/hot-store.test.ts).
    expect(await db.accessToken.count({ where: { grantId } })).toBe(1);
    expect(await db.refreshToken.count({ where: { grantId } })).toBe(2);
    expect(await db.authTransaction.count({ where: { id: txId } })).toBe(0);
    expect(await db.upstreamSession.count({ where: { id: sessionId } })).toBe(1);
  });

  it("counts queries (the benchmark's proof that cached requests skip the database)", async () => {
    const before = database.queryCount();
    await database.db.client.count();
    expect(database.queryCount()).toBe(before + 1);
  });
});
