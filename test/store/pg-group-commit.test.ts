// Group commit on PostgreSQL (store/pg-group-commit.ts), through the hot store against the suite's
// PostgreSQL: the rotations and code exchanges of one event-loop turn commit in one transaction
// (the rows they write share its id, xmin), each still answers for itself (a claim lost to another
// write of the same group answers false), and a write that fails fails alone: the others commit.
// The reads of a turn (a refresh token or a code by its hash) go together too, on one connection.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { openDatabase, type Database } from "../../src/store/db.ts";
import { createPostgresHotStore } from "../../src/store/hot-store-postgres.ts";
import type { AccessToken, RefreshRotation } from "../../src/store/hot-store.ts";
import { accessRow, auditRow, grantRow, later, refreshRow, T0 } from "../support/hot-store-rows.ts";
import { createPostgresDatabase, postgresAvailable } from "../support/pg-database.ts";

const describeIf = postgresAvailable ? describe : describe.skip;
if (!postgresAvailable) process.stdout.write("[notice] PostgreSQL not available: group commit tests skipped\n");

describeIf("group commit on PostgreSQL", () => {
  let database: Database;
  let drop: () => Promise<void>;
  let url: string;

  beforeAll(async () => {
    const created = await createPostgresDatabase();
    drop = created.drop;
    url = created.url;
    database = await openDatabase(created.url);
    await database.db.client.create({
      data: {
        id: "client-1",
        redirectUris: '["http://127.0.0.1/cb"]',
        tokenEndpointAuthMethod: "none",
        grantTypes: '["authorization_code","refresh_token"]',
        responseTypes: '["code"]',
        registrationType: "dynamic",
        createdAt: T0,
      },
    });
  }, 60_000);

  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  /** A grant of its own with one live refresh token: what a rotation claims. */
  async function chain(): Promise<{ grantId: string; tokenId: string }> {
    const { db } = database;
    const grant = await db.grant.create({ data: grantRow() });
    const token = await db.refreshToken.create({ data: refreshRow(grant.id) });
    return { grantId: grant.id, tokenId: token.id };
  }

  function rotation({ grantId, tokenId }: { grantId: string; tokenId: string }, access: Partial<AccessToken> = {}): RefreshRotation {
    const refresh = refreshRow(grantId, { parentId: tokenId });
    return {
      refreshTokenId: tokenId,
      consumedAt: later(5),
      graceUntil: later(65),
      issued: { refresh, access: accessRow(grantId, refresh.id, { createdAt: later(5), ...access }) },
      use: { grantId, lastUsedAt: later(5), idleExpiresAt: later(3605) },
      audit: { ...auditRow("token.refreshed", grantId), at: later(5) },
    };
  }

  /** The transaction that wrote each refresh token (PostgreSQL's xmin), by id. */
  async function writers(ids: string[]): Promise<Map<string, string>> {
    const rows = await database.db.$queryRawUnsafe<Array<{ id: string; xmin: string }>>(
      `SELECT "id", xmin::text AS "xmin" FROM "RefreshToken" WHERE "id" = ANY($1::text[])`,
      ids,
    );
    return new Map(rows.map((r) => [r.id, r.xmin]));
  }

  it("commits the rotations of one turn in one transaction, each answering for itself", async () => {
    const chains = await Promise.all([chain(), chain(), chain(), chain()]);
    const rotations = chains.map((c) => rotation(c));
    // Asked for in the same turn, as concurrent refresh requests are.
    const answers = await Promise.all(rotations.map((r) => database.hot.rotateRefreshToken(r)));
    expect(answers).toEqual([true, true, true, true]);
    const written = await writers(rotations.map((r) => r.issued.refresh.id));
    expect(written.size).toBe(4);
    expect(new Set(written.values()).size).toBe(1);
    // Everything each rotation writes is there: the claim, the new pair, the grant's use, the audit event.
    for (const r of rotations) {
      expect(await database.db.refreshToken.findUniqueOrThrow({ where: { id: r.refreshTokenId } })).toMatchObject({
        consumedAt: later(5),
        successorId: r.issued.refresh.id,
      });
      expect(await database.db.accessToken.count({ where: { id: r.issued.access.id } })).toBe(1);
      expect(await database.db.grant.findUniqueOrThrow({ where: { id: r.use.grantId } })).toMatchObject({ lastUsedAt: later(5) });
      expect(await database.db.auditEvent.count({ where: { id: r.audit.id } })).toBe(1);
    }
  });

  it("lets one claim of a token win within a group: the other rotation of it answers false and writes nothing", async () => {
    const c = await chain();
    const [first, second] = [rotation(c), rotation(c)];
    const answers = await Promise.all([database.hot.rotateRefreshToken(first), database.hot.rotateRefreshToken(second)]);
    expect(answers.filter(Boolean)).toHaveLength(1);
    const loser = answers[0] ? second : first;
    expect(await database.db.refreshToken.count({ where: { id: loser.issued.refresh.id } })).toBe(0);
    expect(await database.db.accessToken.count({ where: { id: loser.issued.access.id } })).toBe(0);
    expect(await database.db.auditEvent.count({ where: { id: loser.audit.id } })).toBe(0);
  });

  it("fails a write that breaks a constraint alone: the others of its group commit", async () => {
    const chains = await Promise.all([chain(), chain(), chain()]);
    const taken = (await database.db.accessToken.findFirstOrThrow()).tokenHash;
    // The middle rotation's access token collides with one already stored (its unique tokenHash).
    const rotations = [rotation(chains[0]!), rotation(chains[1]!, { tokenHash: taken }), rotation(chains[2]!)];
    const settled = await Promise.allSettled(rotations.map((r) => database.hot.rotateRefreshToken(r)));
    expect(settled[0]).toEqual({ status: "fulfilled", value: true });
    expect(settled[1]).toMatchObject({ status: "rejected", reason: { code: "23505" } });
    expect(settled[2]).toEqual({ status: "fulfilled", value: true });
    // Nothing of the failed one stayed: its claim was rolled back with it.
    expect(await database.db.refreshToken.findUniqueOrThrow({ where: { id: chains[1]!.tokenId } })).toMatchObject({ consumedAt: null, successorId: null });
    expect(await database.db.refreshToken.count({ where: { id: rotations[1]!.issued.refresh.id } })).toBe(0);
    const written = await writers([rotations[0]!.issued.refresh.id, rotations[2]!.issued.refresh.id]);
    expect(written.size).toBe(2);
    // After the group failed, each was committed alone.
    expect(new Set(written.values()).size).toBe(2);
    // The failed token can still be rotated.
    expect(await database.hot.rotateRefreshToken(rotation(chains[1]!))).toBe(true);
  });

  it("sends the reads of one turn together on one connection, each answered with its own row", async () => {
    const chains = await Promise.all([chain(), chain(), chain()]);
    const hashes = await Promise.all(chains.map(async (c) => (await database.db.refreshToken.findUniqueOrThrow({ where: { id: c.tokenId } })).tokenHash));
    const application = `reads-${randomUUID().slice(0, 8)}`;
    const separator = url.includes("?") ? "&" : "?";
    const hot = createPostgresHotStore(`${url}${separator}application_name=${application}`);
    try {
      // A fresh pool opens a connection for each statement it runs at the same time.
      const read = await Promise.all([...hashes, "no-such-hash"].map((h) => hot.refreshTokenByHash(h)));
      expect(read.map((row) => row?.id ?? null)).toEqual([...chains.map((c) => c.tokenId), null]);
      expect(read[0]?.grant.id).toBe(chains[0]!.grantId);
      const sessions = await database.db.$queryRawUnsafe<Array<{ n: number }>>(
        `SELECT count(*)::int AS "n" FROM pg_stat_activity WHERE application_name = $1`,
        application,
      );
      expect(sessions[0]!.n).toBe(1);
    } finally {
      await hot.close();
    }
  });

  it("keeps half of each RefreshToken page free, so that a token's claim stays heap-only", async () => {
    // The migration's storage setting, which Prisma's schema cannot express.
    const [table] = await database.db.$queryRawUnsafe<Array<{ options: string[] | null }>>(
      `SELECT reloptions AS "options" FROM pg_class WHERE relname = 'RefreshToken' AND relnamespace = current_schema()::regnamespace`,
    );
    expect(table?.options).toEqual(["fillfactor=50"]);
    // Counted in one transaction: its statistics are its own and read at once. Enough tokens to
    // fill pages: on a full page, a claim's new version must go to another page (and into every
    // index of the table).
    const counted = await database.db.$transaction(async (tx) => {
      const ids: string[] = [];
      const grant = await tx.grant.create({ data: grantRow() });
      for (let i = 0; i < 60; i++) ids.push((await tx.refreshToken.create({ data: refreshRow(grant.id) })).id);
      // Each token claimed once, as a rotation claims it (no indexed column changes).
      for (const id of ids) await tx.$executeRawUnsafe(`UPDATE "RefreshToken" SET "consumedAt" = now(), "successorId" = $2 WHERE "id" = $1`, id, randomUUID());
      const [row] = await tx.$queryRawUnsafe<Array<{ updates: number; hot: number }>>(
        `SELECT n_tup_upd::int AS "updates", n_tup_hot_upd::int AS "hot" FROM pg_stat_xact_user_tables WHERE relname = 'RefreshToken'`,
      );
      return row;
    });
    // Within one transaction nothing is pruned, and a claimed version is longer (its successor,
    // its dates): the last tokens of a page find its free half used up. At fillfactor 100 (the
    // default) none of the 60 stays heap-only; here 48 do.
    expect(counted?.updates).toBe(60);
    expect(counted?.hot).toBeGreaterThanOrEqual(45);
  });

  it("commits a code exchange with the rotations of its turn", async () => {
    const c = await chain();
    const code = await database.db.authorizationCode.create({
      data: {
        id: randomUUID(),
        codeHash: randomUUID(),
        grantId: c.grantId,
        clientId: "client-1",
        redirectUri: "x",
        codeChallenge: "c",
        resource: "r",
        scope: "mcp",
        expiresAt: later(60),
      },
    });
    const r = rotation(c);
    const exchanged = rotation(await chain());
    const [rotated, exchangedAnswer] = await Promise.all([
      database.hot.rotateRefreshToken(r),
      database.hot.exchangeCode({ codeId: code.id, consumedAt: later(5), issued: exchanged.issued, use: exchanged.use, audit: exchanged.audit }),
    ]);
    expect([rotated, exchangedAnswer]).toEqual([true, true]);
    const written = await writers([r.issued.refresh.id, exchanged.issued.refresh.id]);
    expect(new Set(written.values()).size).toBe(1);
  });
});
