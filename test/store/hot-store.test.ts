// Every statement of the hot store against freshly migrated SQLite and PostgreSQL databases, read
// back through Prisma and compared with what Prisma itself writes: the two layers cannot drift
// (columns, date encoding, the claims that make rotation and code exchange happen once).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { openDatabase, type Database } from "../../src/store/db.ts";
import type { GrantUse } from "../../src/store/hot-store.ts";
import { databaseTargets } from "../support/database-targets.ts";
import { hashPresentedToken } from "../../src/grants/token-format.ts";
import { accessRow, auditRow, grantRow, later, refreshRow, T0 } from "../support/hot-store-rows.ts";
import { codeClaim, grantOfToken, refreshTokenClaim, upstreamSessionState } from "../../src/store/hot-rows.ts";

/** An access token with its grant as Prisma reads them (the token's grantId is no relation: two reads). */
async function prismaAccessTokenWithGrant(db: Database["db"], id: string) {
  const token = await db.accessToken.findUniqueOrThrow({ where: { id } });
  const grant = await db.grant.findUniqueOrThrow({
    where: { id: token.grantId },
    include: { upstreamSession: true, client: { select: { registrationType: true, grantTypes: true } } },
  });
  return { ...token, grant };
}

describe.each(databaseTargets("hot store tests"))("the hot store on $name", (target) => {
  let database: Database;
  let cleanup: () => Promise<void>;
  let grantId: string;
  let sessionId: string;

  const use = (seconds: number): GrantUse => ({ grantId, lastUsedAt: later(seconds), idleExpiresAt: later(seconds + 3600) });

  beforeAll(async () => {
    const setup = await target.setup();
    cleanup = setup.cleanup;
    database = await openDatabase(setup.url);
    const { db } = database;
    await db.client.create({
      data: {
        id: "client-1",
        secretHash: "ab".repeat(32),
        redirectUris: '["http://127.0.0.1/cb"]',
        tokenEndpointAuthMethod: "client_secret_basic",
        grantTypes: '["authorization_code","refresh_token"]',
        responseTypes: '["code"]',
        registrationType: "dynamic",
        createdAt: T0,
      },
    });
    sessionId = (
      await db.upstreamSession.create({
        data: {
          id: randomUUID(),
          provider: "github",
          subject: "github:1",
          login: "octo",
          profile: "{}",
          // Read with the token on every validation: the hot store's columns must bring it.
          facts: '{"verifiedEmails":["octo@example.com"],"groups":["staff"],"memberships":[]}',
          accessTokenEnc: "enc",
          lastCheckedAt: T0,
          status: "active",
        },
      })
    ).id;
    grantId = (
      await db.grant.create({
        data: {
          id: randomUUID(),
          clientId: "client-1",
          upstreamSessionId: sessionId,
          subject: "github:1",
          kind: "authorization_code",
          resource: "https://rs.example/mcp",
          scope: "mcp offline_access",
          lastUsedAt: T0,
          idleExpiresAt: later(3600),
          absoluteExpiresAt: later(86400),
        },
      })
    ).id;
  }, 60_000);

  afterAll(async () => {
    await database?.close();
    await cleanup?.();
  });

  it("reads clients, tokens, codes and upstream sessions exactly as Prisma does", async () => {
    const { db, hot } = database;
    const refresh = await db.refreshToken.create({ data: refreshRow(grantId) });
    const access = await db.accessToken.create({ data: accessRow(grantId, refresh.id) });
    const code = await db.authorizationCode.create({
      data: {
        id: randomUUID(),
        codeHash: randomUUID(),
        grantId,
        clientId: "client-1",
        redirectUri: "http://127.0.0.1/cb",
        codeChallenge: "c",
        resource: "https://rs.example/mcp",
        scope: "mcp",
        expiresAt: later(60),
      },
    });

    expect(await hot.clientById("client-1")).toEqual(await db.client.findUnique({ where: { id: "client-1" } }));
    expect(await hot.clientById("nobody")).toBeNull();
    // The token's client and grant come with it (no Prisma relation from a token to either: read apart).
    const client = await db.client.findUniqueOrThrow({ where: { id: "client-1" } });
    // A refresh reads only the columns hot-rows.ts names for it (the whole client): Prisma's
    // rows cut to them. Nothing else comes along (toEqual fails on an extra column).
    const only = <Row extends object>(row: Row, columns: readonly string[]) => Object.fromEntries(Object.entries(row).filter(([k]) => columns.includes(k)));
    const session = await db.upstreamSession.findUniqueOrThrow({ where: { id: sessionId } });
    expect(await hot.refreshTokenByHash(refresh.tokenHash)).toEqual({
      ...only(await db.refreshToken.findUniqueOrThrow({ where: { id: refresh.id } }), refreshTokenClaim.columns),
      client,
      grant: {
        ...only(await db.grant.findUniqueOrThrow({ where: { id: refresh.grantId } }), grantOfToken.columns),
        upstreamSession: only(session, upstreamSessionState.columns),
      },
    });
    expect(Object.keys(only(session, upstreamSessionState.columns))).toHaveLength(upstreamSessionState.columns.length);
    // A grant without an upstream session (client_credentials has no refresh token, but the join must hold).
    const bare = await db.grant.create({
      data: { ...(await db.grant.findUniqueOrThrow({ where: { id: grantId } })), id: randomUUID(), upstreamSessionId: null },
    });
    const bareRefresh = await db.refreshToken.create({ data: refreshRow(bare.id) });
    expect(await hot.refreshTokenByHash(bareRefresh.tokenHash)).toEqual({
      ...only(bareRefresh, refreshTokenClaim.columns),
      client,
      grant: { ...only(bare, grantOfToken.columns), upstreamSession: null },
    });
    expect(await hot.refreshTokenByHash("unknown")).toBeNull();
    expect(await hot.refreshTokenById(refresh.id)).toEqual(refresh);
    expect(await hot.codeByHash(code.codeHash)).toEqual({
      ...only(code, codeClaim.columns),
      grant: only(await db.grant.findUniqueOrThrow({ where: { id: code.grantId } }), grantOfToken.columns),
      client,
    });
    expect(await hot.accessTokenByHash(access.tokenHash)).toEqual(await prismaAccessTokenWithGrant(db, access.id));
    expect(await hot.upstreamSessionById(sessionId)).toEqual(await db.upstreamSession.findUnique({ where: { id: sessionId } }));
    // A machine client's grant has no upstream session: the joined columns come back null.
    const machineGrant = await db.grant.create({
      data: {
        id: randomUUID(),
        clientId: "client-1",
        kind: "client_credentials",
        resource: "https://rs.example/mcp",
        scope: "mcp",
        lastUsedAt: T0,
        idleExpiresAt: later(3600),
        absoluteExpiresAt: later(86400),
      },
    });
    const machineAccess = await db.accessToken.create({ data: accessRow(machineGrant.id, null) });
    const machineRead = await hot.accessTokenByHash(machineAccess.tokenHash);
    expect(machineRead?.grant.upstreamSession).toBeNull();
    expect(machineRead).toEqual(await prismaAccessTokenWithGrant(db, machineAccess.id));
  });

  it("reads any text exactly as stored: quotes, escapes, JSON-like text, letters beyond ASCII and beyond the BMP", async () => {
    // SQLite's joined reads arrive as one JSON array (sqlite-hot-sql.ts): every character must
    // come back as it went in, and text that looks like JSON must stay text.
    const { db, hot } = database;
    const tricky = 'Say "hi" \\ back\\slash\nnew line\ttab {"a":1} [2] null é ß 漢 😀';
    await db.client.create({
      data: {
        id: "client-tricky",
        redirectUris: JSON.stringify(['http://127.0.0.1/cb?q="x"&é']),
        tokenEndpointAuthMethod: "none",
        grantTypes: '["authorization_code","refresh_token"]',
        responseTypes: '["code"]',
        clientName: tricky,
        clientUri: "null",
        logoUri: '{"not":"an object"}',
        softwareId: "123",
        softwareVersion: "true",
        registrationType: "metadata_document",
        createdAt: T0,
      },
    });
    const grant = await db.grant.create({ data: { ...grantRow(), clientId: "client-tricky", subject: tricky, scope: '"mcp"' } });
    const refresh = await db.refreshToken.create({
      data: refreshRow(grant.id, { clientId: "client-tricky", resource: `https://rs.example/mcp?x=${encodeURIComponent(tricky)}` }),
    });
    const access = await db.accessToken.create({ data: accessRow(grant.id, refresh.id, { clientId: "client-tricky", scope: tricky }) });
    const client = await db.client.findUniqueOrThrow({ where: { id: "client-tricky" } });
    const read = await hot.refreshTokenByHash(refresh.tokenHash);
    expect(read?.client).toEqual(client);
    expect(read?.resource).toBe(refresh.resource);
    expect(read?.grant.subject).toBe(tricky);
    expect(read?.grant.scope).toBe('"mcp"');
    expect(await hot.accessTokenByHash(access.tokenHash)).toEqual(await prismaAccessTokenWithGrant(db, access.id));
  });

  it("reads a token whose grant row is gone as no token: its grantId is no relation, nothing cascades to it", async () => {
    const { db, hot } = database;
    const grant = await db.grant.create({ data: grantRow() });
    const refresh = await db.refreshToken.create({ data: refreshRow(grant.id) });
    const access = await db.accessToken.create({ data: accessRow(grant.id, refresh.id) });
    expect((await hot.refreshTokenByHash(refresh.tokenHash))?.grant.id).toBe(grant.id);
    expect((await hot.accessTokenByHash(access.tokenHash))?.grant.id).toBe(grant.id);
    await db.grant.delete({ where: { id: grant.id } });
    // The rows stay until the sweep removes them at their expiry; they never read as tokens again.
    expect(await db.refreshToken.count({ where: { id: refresh.id } })).toBe(1);
    expect(await db.accessToken.count({ where: { id: access.id } })).toBe(1);
    expect(await hot.refreshTokenByHash(refresh.tokenHash)).toBeNull();
    expect(await hot.accessTokenByHash(access.tokenHash)).toBeNull();
  });

  it("writes dates exactly as Prisma does, so Prisma's date filters find the hot store's rows", async () => {
    const { db, hot } = database;
    const when = new Date("2032-01-02T03:04:05.006Z");
    await db.client.create({
      data: { id: "client-2", redirectUris: "[]", tokenEndpointAuthMethod: "none", grantTypes: "[]", responseTypes: "[]", registrationType: "dynamic" },
    });
    await db.client.update({ where: { id: "client-2" }, data: { lastUsedAt: when } });
    await hot.touchClient("client-1", when);
    const raw = async (id: string) => {
      const sql =
        target.name === "sqlite"
          ? `SELECT "lastUsedAt" || '' AS v FROM "Client" WHERE "id" = '${id}'`
          : `SELECT "lastUsedAt"::text AS v FROM "Client" WHERE "id" = '${id}'`;
      return (await db.$queryRawUnsafe<Array<{ v: string }>>(sql))[0]!.v;
    };
    expect(await raw("client-1")).toBe(await raw("client-2"));
    expect((await db.client.findMany({ where: { lastUsedAt: { gte: when, lte: when } }, orderBy: { id: "asc" } })).map((c) => c.id)).toEqual([
      "client-1",
      "client-2",
    ]);
  });

  it("rotates a refresh token once: the claim, the new pair, the grant's use and the audit event, or nothing", async () => {
    const { db, hot } = database;
    const old = await db.refreshToken.create({ data: refreshRow(grantId, { firstUsedAt: null }) });
    const successor = refreshRow(grantId, { parentId: old.id, createdAt: later(5) });
    const access = accessRow(grantId, successor.id);
    const rotation = {
      refreshTokenId: old.id,
      consumedAt: later(5),
      graceUntil: later(65),
      issued: { refresh: successor, access },
      use: use(5),
      audit: auditRow("token.refreshed", grantId),
    };
    expect(await hot.rotateRefreshToken(rotation)).toBe(true);
    expect(await db.refreshToken.findUnique({ where: { id: old.id } })).toEqual({
      ...old,
      consumedAt: later(5),
      graceUntil: later(65),
      firstUsedAt: later(5),
      successorId: successor.id,
    });
    expect(await db.refreshToken.findUnique({ where: { id: successor.id } })).toEqual(successor);
    expect(await db.accessToken.findUnique({ where: { id: access.id } })).toEqual(access);
    expect(await db.grant.findUniqueOrThrow({ where: { id: grantId } })).toMatchObject({ lastUsedAt: later(5), idleExpiresAt: later(3605) });
    expect(await db.auditEvent.findUnique({ where: { id: rotation.audit.id } })).toEqual(rotation.audit);
    // Prisma's filters see the hot store's dates.
    expect(await db.refreshToken.count({ where: { id: successor.id, expiresAt: { gt: later(3599) }, createdAt: { lte: later(5) } } })).toBe(1);

    // A second rotation of the same token writes nothing.
    const again = { ...rotation, issued: { refresh: refreshRow(grantId), access: accessRow(grantId, null) }, audit: auditRow("token.refreshed", grantId) };
    expect(await hot.rotateRefreshToken(again)).toBe(false);
    expect(await db.refreshToken.count({ where: { id: again.issued.refresh.id } })).toBe(0);
    expect(await db.accessToken.count({ where: { id: again.issued.access.id } })).toBe(0);
    expect(await db.auditEvent.count({ where: { id: again.audit.id } })).toBe(0);

    // A revoked token cannot be claimed either; an earlier firstUsedAt stays.
    const revoked = await db.refreshToken.create({ data: refreshRow(grantId, { revokedAt: T0 }) });
    expect(await hot.rotateRefreshToken({ ...again, refreshTokenId: revoked.id })).toBe(false);
    const used = await db.refreshToken.create({ data: refreshRow(grantId, { firstUsedAt: T0 }) });
    const next = refreshRow(grantId);
    expect(
      await hot.rotateRefreshToken({
        ...rotation,
        refreshTokenId: used.id,
        issued: { refresh: next, access: accessRow(grantId, next.id) },
        audit: auditRow("x", grantId),
      }),
    ).toBe(true);
    expect((await db.refreshToken.findUniqueOrThrow({ where: { id: used.id } })).firstUsedAt).toEqual(T0);
  });

  it("exchanges a code once, with or without a refresh token", async () => {
    const { db, hot } = database;
    const code = (id = randomUUID()) =>
      db.authorizationCode.create({
        data: { id, codeHash: id, grantId, clientId: "client-1", redirectUri: "x", codeChallenge: "c", resource: "r", scope: "mcp", expiresAt: later(60) },
      });
    const first = await code();
    const refresh = refreshRow(grantId);
    const exchange = {
      codeId: first.id,
      consumedAt: later(7),
      issued: { refresh, access: accessRow(grantId, refresh.id) },
      use: use(7),
      audit: auditRow("token.issued", grantId),
    };
    expect(await hot.exchangeCode(exchange)).toBe(true);
    expect((await db.authorizationCode.findUniqueOrThrow({ where: { id: first.id } })).consumedAt).toEqual(later(7));
    expect(await db.refreshToken.findUnique({ where: { id: refresh.id } })).toEqual(refresh);
    expect(await db.accessToken.findUnique({ where: { id: exchange.issued.access.id } })).toEqual(exchange.issued.access);
    expect(await db.auditEvent.findUnique({ where: { id: exchange.audit.id } })).toEqual(exchange.audit);
    expect((await db.grant.findUniqueOrThrow({ where: { id: grantId } })).lastUsedAt).toEqual(later(7));

    const replay = { ...exchange, issued: { refresh: null, access: accessRow(grantId, null) }, audit: auditRow("token.issued", grantId) };
    expect(await hot.exchangeCode(replay)).toBe(false);
    expect(await db.accessToken.count({ where: { id: replay.issued.access.id } })).toBe(0);

    const second = await code();
    const refreshTokens = await db.refreshToken.count();
    expect(await hot.exchangeCode({ ...replay, codeId: second.id })).toBe(true);
    expect(await db.accessToken.findUnique({ where: { id: replay.issued.access.id } })).toEqual(replay.issued.access);
    expect(await db.refreshToken.count()).toBe(refreshTokens);
  });

  it("moves a live grant's idle deadline, never a dead one's", async () => {
    const { db, hot } = database;
    await hot.recordGrantUse(use(100));
    expect(await db.grant.findUniqueOrThrow({ where: { id: grantId } })).toMatchObject({ lastUsedAt: later(100), idleExpiresAt: later(3700) });
    // Past its idle deadline: stays dead.
    await hot.recordGrantUse(use(4000));
    expect((await db.grant.findUniqueOrThrow({ where: { id: grantId } })).lastUsedAt).toEqual(later(100));
    const revoked = await db.grant.create({
      data: {
        id: randomUUID(),
        clientId: "client-1",
        kind: "client_credentials",
        resource: "r",
        scope: "mcp",
        lastUsedAt: T0,
        idleExpiresAt: later(3600),
        absoluteExpiresAt: later(86400),
        revokedAt: T0,
      },
    });
    await hot.recordGrantUse({ grantId: revoked.id, lastUsedAt: later(10), idleExpiresAt: later(9999) });
    expect((await db.grant.findUniqueOrThrow({ where: { id: revoked.id } })).lastUsedAt).toEqual(T0);
  });

  it("records upstream re-checks, with and without the facts the policy read", async () => {
    const { db, hot } = database;
    const before = await db.upstreamSession.findUniqueOrThrow({ where: { id: sessionId } });
    await hot.recordUpstreamCheck(sessionId, { lastCheckedAt: later(30), accessExpiresAt: later(900) });
    const checked = await db.upstreamSession.findUniqueOrThrow({ where: { id: sessionId } });
    expect(checked).toMatchObject({ lastCheckedAt: later(30), accessExpiresAt: later(900), login: "octo", profile: "{}" });
    expect(checked.updatedAt.getTime()).toBeGreaterThanOrEqual(before.updatedAt.getTime());
    const facts = '{"verifiedEmails":["o@x"],"groups":["platform"],"memberships":["acme/platform"]}';
    await hot.recordUpstreamCheck(sessionId, {
      lastCheckedAt: later(60),
      accessExpiresAt: null,
      facts: { login: "octo2", email: "o@x", profile: '{"a":1}', facts },
    });
    expect(await db.upstreamSession.findUniqueOrThrow({ where: { id: sessionId } })).toMatchObject({
      lastCheckedAt: later(60),
      accessExpiresAt: null,
      login: "octo2",
      email: "o@x",
      profile: '{"a":1}',
      facts,
    });
    // A check that read nothing new keeps the stored facts.
    await hot.recordUpstreamCheck(sessionId, { lastCheckedAt: later(90), accessExpiresAt: null });
    expect(await db.upstreamSession.findUniqueOrThrow({ where: { id: sessionId } })).toMatchObject({ lastCheckedAt: later(90), facts });
  });

  it("commits writes made together independently: one that fails takes back only its own changes", async () => {
    const { db, hot } = database;
    const trigger =
      target.name === "sqlite"
        ? [`CREATE TRIGGER refuse_audit BEFORE INSERT ON "AuditEvent" WHEN NEW.type = 'refused' BEGIN SELECT RAISE(ABORT, 'refused'); END`]
        : [
            `CREATE FUNCTION refuse_audit() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$ LANGUAGE plpgsql`,
            `CREATE TRIGGER refuse_audit BEFORE INSERT ON "AuditEvent" FOR EACH ROW WHEN (NEW.type = 'refused') EXECUTE FUNCTION refuse_audit()`,
          ];
    for (const sql of trigger) await db.$executeRawUnsafe(sql);
    const olds = await Promise.all([0, 1, 2].map(() => db.refreshToken.create({ data: refreshRow(grantId) })));
    const rotations = olds.map((old, i) => {
      const next = refreshRow(grantId, { parentId: old.id });
      return {
        refreshTokenId: old.id,
        consumedAt: later(9),
        graceUntil: later(69),
        issued: { refresh: next, access: accessRow(grantId, next.id) },
        use: use(9),
        audit: auditRow(i === 1 ? "refused" : "token.refreshed", grantId),
      };
    });
    // One event-loop turn: on SQLite, one group.
    const outcomes = await Promise.allSettled(rotations.map((r) => hot.rotateRefreshToken(r)));
    expect(outcomes.map((o) => o.status)).toEqual(["fulfilled", "rejected", "fulfilled"]);
    const stored = await Promise.all(olds.map((old) => db.refreshToken.findUniqueOrThrow({ where: { id: old.id } })));
    expect(stored.map((r) => r.successorId)).toEqual([rotations[0]!.issued.refresh.id, null, rotations[2]!.issued.refresh.id]);
    expect(await db.refreshToken.count({ where: { id: rotations[1]!.issued.refresh.id } })).toBe(0);
    expect(await db.accessToken.count({ where: { id: rotations[1]!.issued.access.id } })).toBe(0);
    await db.$executeRawUnsafe(target.name === "sqlite" ? `DROP TRIGGER refuse_audit` : `DROP TRIGGER refuse_audit ON "AuditEvent"`);
  });

  it("lists revocations after a moment: grants, and single tokens of live grants", async () => {
    const { db, hot } = database;
    const grantData = (revokedAt: Date | null) => grantRow({ resource: "r", revokedAt });
    const dead = await db.grant.create({ data: grantData(later(50)) });
    const live = await db.grant.create({ data: grantData(null) });
    const single = await db.accessToken.create({ data: { ...accessRow(live.id, null), revokedAt: later(60) } });
    await db.accessToken.create({ data: { ...accessRow(dead.id, null), revokedAt: later(50) } });
    expect(await hot.revokedSince(later(40))).toEqual({
      grants: [{ id: dead.id, revokedAt: later(50) }],
      tokens: [{ tokenHash: single.tokenHash, revokedAt: later(60) }],
    });
    expect(await hot.revokedSince(later(55))).toEqual({ grants: [], tokens: [{ tokenHash: single.tokenHash, revokedAt: later(60) }] });
    expect(await hot.revokedSince(later(60))).toEqual({ grants: [], tokens: [] });
  });

  it("announces any number of revoked grants and token keys, every one heard (PostgreSQL: one NOTIFY holds under 8,000 bytes)", async () => {
    if (target.name !== "postgres") return; // SQLite instances poll the file instead (hot-store-sqlite.ts).
    const { hot } = database;
    const grantIds = Array.from({ length: 150 }, () => randomUUID());
    // Full-size keys as tokens are stored now: a 12-digit stamp and a SHA-256 (grants/token-format.ts).
    const tokenHashes = Array.from({ length: 250 }, (_, i) =>
      hashPresentedToken(`mab_at_${"x".repeat(43)}${(0x19000000000 + i).toString(16).padStart(12, "0")}`),
    );
    expect(tokenHashes[0]).toHaveLength(76);
    const heard = { grantIds: new Set<string>(), tokenHashes: new Set<string>() };
    // The listener's LISTEN is in place once an announcement of its own comes back; more copies of
    // it may arrive later, and are not counted.
    const ready = randomUUID();
    let listening = false;
    let done!: () => void;
    const all = new Promise<void>((resolve) => (done = resolve));
    let failed: unknown;
    const stop = hot.listenForRevocations(
      (r) => {
        for (const id of r.grantIds ?? []) {
          if (id === ready) listening = true;
          else heard.grantIds.add(id);
        }
        for (const hash of r.tokenHashes ?? []) heard.tokenHashes.add(hash);
        if (heard.grantIds.size === grantIds.length && heard.tokenHashes.size === tokenHashes.length) done();
      },
      (err) => (failed = err),
    );
    try {
      while (!listening) await hot.announceRevocation({ grantIds: [ready] });
      await hot.announceRevocation({ grantIds, tokenHashes });
      await all;
    } finally {
      await stop();
    }
    expect(failed).toBeUndefined();
    expect(heard.tokenHashes).toEqual(new Set(tokenHashes));
    expect(heard.grantIds).toEqual(new Set(grantIds));
  });

  it("binds MCP sessions first-claim-wins and releases them", async () => {
    const { db, hot } = database;
    expect(await hot.mcpSessionOwner("h1")).toBeNull();
    const [a, b] = await Promise.all([
      hot.claimMcpSession({ sessionHash: "h1", owner: "github:1", createdAt: T0 }),
      hot.claimMcpSession({ sessionHash: "h1", owner: "github:2", createdAt: T0 }),
    ]);
    // Concurrent claims (on PostgreSQL, over two pooled connections) may land in either order: the
    // first to commit wins, and both are told the same owner.
    expect(["github:1", "github:2"]).toContain(a);
    expect(b).toBe(a);
    expect(await hot.mcpSessionOwner("h1")).toBe(a);
    expect(await db.mcpSession.findUnique({ where: { sessionHash: "h1" } })).toEqual({ sessionHash: "h1", owner: a, createdAt: T0 });
    // A later claim by someone else finds the owner.
    expect(await hot.claimMcpSession({ sessionHash: "h1", owner: "github:3", createdAt: T0 })).toBe(a);
    await hot.releaseMcpSession("h1");
    expect(await hot.mcpSessionOwner("h1")).toBeNull();
  });

  it("claims a client assertion once until it expires, one winner among concurrent claims", async () => {
    const { db, hot } = database;
    const claims = await Promise.all(Array.from({ length: 6 }, () => hot.claimAssertion("jti-1", later(60), T0)));
    expect(claims.filter(Boolean)).toHaveLength(1);
    expect(await db.usedAssertion.findUnique({ where: { key: "jti-1" } })).toEqual({ key: "jti-1", expiresAt: later(60) });
    // Until its expiry the key stays taken; a row past its expiry counts as none.
    expect(await hot.claimAssertion("jti-1", later(120), later(59))).toBe(false);
    expect(await hot.claimAssertion("jti-1", later(120), later(60))).toBe(true);
    expect(await db.usedAssertion.findUnique({ where: { key: "jti-1" } })).toEqual({ key: "jti-1", expiresAt: later(120) });
    expect(await hot.claimAssertion("jti-2", later(60), T0)).toBe(true);
  });
});
