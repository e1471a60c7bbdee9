// The hot store on SQLite: the `libsql` package's synchronous API (the engine under Prisma's
// adapter, without the async client around it), statements prepared once per connection, reads
// straight away, writes grouped per event-loop turn (sqlite-group-commit.ts). Dates are written as
// Prisma's libsql adapter writes them (ISO 8601 with "+00:00"), so comparisons in SQL and Prisma's
// reads agree on rows from either side.
import Database from "libsql";
import type { HotStore, UpstreamCheck } from "./hot-store.ts";
import { columnList, decodeRow, rowValues, tables, type Table } from "./hot-rows.ts";
import { GroupCommit } from "./sqlite-group-commit.ts";
import { SQLITE_CONNECTION_PRAGMAS } from "./sqlite-connections.ts";
import { sqliteWriteGate } from "./sqlite-write-gate.ts";

type Connection = Database.Database;
type Statement = Database.Statement;

/** Prisma's encoding of a DateTime on SQLite (checked against Prisma's own rows in test/store/hot-store.test.ts). */
export function sqliteDate(date: Date): string {
  return `${date.toISOString().slice(0, -1)}+00:00`;
}

const readDate = (value: unknown): Date => new Date(value as string);
const encode = <Row>(t: Table<Row>, row: Row) => rowValues(t, row, sqliteDate);
const insert = <Row>(t: Table<Row>) => `INSERT INTO "${t.name}" (${t.columns.map((c) => `"${c}"`).join(", ")}) VALUES (${t.columns.map(() => "?").join(", ")})`;

const { client, grant, upstreamSession, authorizationCode, accessToken, refreshToken, auditEvent } = tables;

const SQL = {
  clientById: `SELECT ${columnList(client, "c")} FROM "Client" AS "c" WHERE "c"."id" = ?`,
  touchClient: `UPDATE "Client" SET "lastUsedAt" = ? WHERE "id" = ?`,
  refreshTokenByHash: `SELECT ${columnList(refreshToken, "r")}, ${columnList(grant, "g")} FROM "RefreshToken" AS "r" JOIN "Grant" AS "g" ON "g"."id" = "r"."grantId" WHERE "r"."tokenHash" = ?`,
  refreshTokenById: `SELECT ${columnList(refreshToken, "r")} FROM "RefreshToken" AS "r" WHERE "r"."id" = ?`,
  claimRefreshToken: `UPDATE "RefreshToken" SET "consumedAt" = ?, "graceUntil" = ?, "firstUsedAt" = COALESCE("firstUsedAt", ?), "successorId" = ? WHERE "id" = ? AND "consumedAt" IS NULL AND "revokedAt" IS NULL`,
  codeByHash: `SELECT ${columnList(authorizationCode, "a")}, ${columnList(grant, "g")} FROM "AuthorizationCode" AS "a" JOIN "Grant" AS "g" ON "g"."id" = "a"."grantId" WHERE "a"."codeHash" = ?`,
  claimCode: `UPDATE "AuthorizationCode" SET "consumedAt" = ? WHERE "id" = ? AND "consumedAt" IS NULL`,
  useGrant: `UPDATE "Grant" SET "lastUsedAt" = ?, "idleExpiresAt" = ? WHERE "id" = ?`,
  useLiveGrant: `UPDATE "Grant" SET "lastUsedAt" = ?, "idleExpiresAt" = ? WHERE "id" = ? AND "revokedAt" IS NULL AND "idleExpiresAt" > ?`,
  insertRefreshToken: insert(refreshToken),
  insertAccessToken: insert(accessToken),
  insertAuditEvent: insert(auditEvent),
  accessTokenByHash: `SELECT ${columnList(accessToken, "a")}, ${columnList(grant, "g")}, "u"."id", "u"."login", "u"."subject", "c"."registrationType", "c"."grantTypes"
    FROM "AccessToken" AS "a" JOIN "Grant" AS "g" ON "g"."id" = "a"."grantId" JOIN "Client" AS "c" ON "c"."id" = "g"."clientId"
    LEFT JOIN "UpstreamSession" AS "u" ON "u"."id" = "g"."upstreamSessionId" WHERE "a"."tokenHash" = ?`,
  upstreamSessionById: `SELECT ${columnList(upstreamSession, "u")} FROM "UpstreamSession" AS "u" WHERE "u"."id" = ?`,
  recordCheck: `UPDATE "UpstreamSession" SET "lastCheckedAt" = ?, "accessExpiresAt" = ?, "updatedAt" = ? WHERE "id" = ?`,
  recordCheckWithFacts: `UPDATE "UpstreamSession" SET "lastCheckedAt" = ?, "accessExpiresAt" = ?, "updatedAt" = ?, "login" = ?, "email" = ?, "profile" = ? WHERE "id" = ?`,
  revokedGrants: `SELECT "id", "revokedAt" FROM "Grant" WHERE "revokedAt" > ?`,
  // The grant as a subquery: as a join, SQLite walked every live grant's tokens (2.4 ms at 8,000
  // tokens, growing) instead of the few recently revoked ones through the revokedAt index.
  revokedTokens: `SELECT "a"."tokenHash", "a"."revokedAt" FROM "AccessToken" AS "a"
    WHERE "a"."revokedAt" > ? AND (SELECT "g"."revokedAt" FROM "Grant" AS "g" WHERE "g"."id" = "a"."grantId") IS NULL`,
  mcpSessionOwner: `SELECT "owner" FROM "McpSession" WHERE "sessionHash" = ?`,
  claimMcpSession: `INSERT INTO "McpSession" ("sessionHash", "owner", "createdAt") VALUES (?, ?, ?) ON CONFLICT ("sessionHash") DO NOTHING`,
  releaseMcpSession: `DELETE FROM "McpSession" WHERE "sessionHash" = ?`,
} as const;

type StatementName = keyof typeof SQL;

/** SQLITE_READONLY and its extended codes: the connection was opened read-only and stays so. */
function openedReadOnly(err: unknown): boolean {
  const rawCode = (err as { rawCode?: unknown } | null)?.rawCode;
  return typeof rawCode === "number" && (rawCode & 0xff) === 8;
}

/** The per-connection settings as SQLite reports them (for tests: every connection must carry them). */
export interface SqliteConnectionSettings {
  readonly busyTimeout: number;
  readonly synchronous: number;
  readonly foreignKeys: number;
  readonly journalMode: string;
}

export function createSqliteHotStore(file: string): HotStore & { readonly stats: GroupCommit["stats"]; connectionSettings(): SqliteConnectionSettings } {
  let connection: Connection | undefined;
  let statements = new Map<StatementName, Statement>();

  /** Opened on first use (the file may not be migrated yet when the store is made). */
  const db = (): Connection => {
    if (connection) return connection;
    const opened = new Database(file);
    try {
      opened.prepare(SQLITE_CONNECTION_PRAGMAS.withRow).get();
      opened.exec(SQLITE_CONNECTION_PRAGMAS.rowless);
      opened.prepare("PRAGMA journal_mode = WAL").get();
    } catch (err) {
      opened.close();
      throw err;
    }
    connection = opened;
    return opened;
  };
  /** A statement prepared once per connection, in raw mode (rows as arrays in column order). */
  const stmt = (name: StatementName): Statement => {
    let prepared = statements.get(name);
    if (!prepared) {
      prepared = db().prepare(SQL[name]);
      if (prepared.reader) prepared.raw(true);
      statements.set(name, prepared);
    }
    return prepared;
  };
  /** After a read-only open, a fresh connection may write again (the file's permissions were fixed). */
  const dropIfReadOnly = (err: unknown) => {
    if (!openedReadOnly(err) || !connection) return;
    connection.close();
    connection = undefined;
    statements = new Map();
  };
  const writer = new GroupCommit(db, sqliteWriteGate(file), dropIfReadOnly);
  const read = <T>(work: () => T): Promise<T> => {
    try {
      return Promise.resolve(work());
    } catch (err) {
      dropIfReadOnly(err);
      return Promise.reject(err);
    }
  };
  const row = (name: StatementName, ...params: unknown[]) => stmt(name).get(...params) as unknown[] | undefined;
  const useGrant = (use: { grantId: string; lastUsedAt: Date; idleExpiresAt: Date }) =>
    stmt("useGrant").run(sqliteDate(use.lastUsedAt), sqliteDate(use.idleExpiresAt), use.grantId);

  return {
    kind: "sqlite",
    stats: writer.stats,
    connectionSettings() {
      const value = (pragma: string) => (db().prepare(`PRAGMA ${pragma}`).raw(true).get() as [number | string])[0];
      return {
        busyTimeout: Number(value("busy_timeout")),
        synchronous: Number(value("synchronous")),
        foreignKeys: Number(value("foreign_keys")),
        journalMode: String(value("journal_mode")),
      };
    },

    clientById: (id) =>
      read(() => {
        const values = row("clientById", id);
        return values ? decodeRow(client, values, 0, readDate) : null;
      }),
    touchClient: (id, at) => writer.write(() => void stmt("touchClient").run(sqliteDate(at), id)),

    refreshTokenByHash: (tokenHash) =>
      read(() => {
        const values = row("refreshTokenByHash", tokenHash);
        if (!values) return null;
        return { ...decodeRow(refreshToken, values, 0, readDate), grant: decodeRow(grant, values, refreshToken.columns.length, readDate) };
      }),
    refreshTokenById: (id) =>
      read(() => {
        const values = row("refreshTokenById", id);
        return values ? decodeRow(refreshToken, values, 0, readDate) : null;
      }),
    rotateRefreshToken: (r) =>
      writer.write(() => {
        const consumedAt = sqliteDate(r.consumedAt);
        const claim = stmt("claimRefreshToken").run(consumedAt, sqliteDate(r.graceUntil), consumedAt, r.issued.refresh.id, r.refreshTokenId);
        if (claim.changes !== 1) return false;
        stmt("insertRefreshToken").run(...encode(refreshToken, r.issued.refresh));
        stmt("insertAccessToken").run(...encode(accessToken, r.issued.access));
        useGrant(r.use);
        stmt("insertAuditEvent").run(...encode(auditEvent, r.audit));
        return true;
      }),

    codeByHash: (codeHash) =>
      read(() => {
        const values = row("codeByHash", codeHash);
        if (!values) return null;
        return { ...decodeRow(authorizationCode, values, 0, readDate), grant: decodeRow(grant, values, authorizationCode.columns.length, readDate) };
      }),
    exchangeCode: (e) =>
      writer.write(() => {
        if (stmt("claimCode").run(sqliteDate(e.consumedAt), e.codeId).changes !== 1) return false;
        useGrant(e.use);
        if (e.issued.refresh) stmt("insertRefreshToken").run(...encode(refreshToken, e.issued.refresh));
        stmt("insertAccessToken").run(...encode(accessToken, e.issued.access));
        stmt("insertAuditEvent").run(...encode(auditEvent, e.audit));
        return true;
      }),

    accessTokenByHash: (tokenHash) =>
      read(() => {
        const values = row("accessTokenByHash", tokenHash);
        if (!values) return null;
        const at = accessToken.columns.length;
        const extra = at + grant.columns.length;
        const [sessionId, login, subject, registrationType, grantTypes] = values.slice(extra) as [string | null, string | null, string, string, string];
        return {
          ...decodeRow(accessToken, values, 0, readDate),
          grant: {
            ...decodeRow(grant, values, at, readDate),
            upstreamSession: sessionId === null ? null : { login, subject },
            client: { registrationType, grantTypes },
          },
        };
      }),
    recordGrantUse: (use) =>
      writer.write(() => {
        const at = sqliteDate(use.lastUsedAt);
        stmt("useLiveGrant").run(at, sqliteDate(use.idleExpiresAt), use.grantId, at);
      }),

    upstreamSessionById: (id) =>
      read(() => {
        const values = row("upstreamSessionById", id);
        return values ? decodeRow(upstreamSession, values, 0, readDate) : null;
      }),
    recordUpstreamCheck: (id, check: UpstreamCheck) =>
      writer.write(() => {
        const common = [sqliteDate(check.lastCheckedAt), check.accessExpiresAt ? sqliteDate(check.accessExpiresAt) : null, sqliteDate(new Date())];
        if (check.facts) stmt("recordCheckWithFacts").run(...common, check.facts.login, check.facts.email, check.facts.profile, id);
        else stmt("recordCheck").run(...common, id);
      }),

    revokedSince: (since) =>
      read(() => {
        const at = sqliteDate(since);
        const rows = (name: StatementName) => stmt(name).all(at) as Array<[string, string]>;
        return {
          grants: rows("revokedGrants").map(([id, revokedAt]) => ({ id, revokedAt: readDate(revokedAt) })),
          tokens: rows("revokedTokens").map(([tokenHash, revokedAt]) => ({ tokenHash, revokedAt: readDate(revokedAt) })),
        };
      }),

    announceRevocation: async () => undefined,
    listenForRevocations: () => async () => undefined,

    mcpSessionOwner: (sessionHash) => read(() => (row("mcpSessionOwner", sessionHash)?.[0] as string | undefined) ?? null),
    claimMcpSession: (session) =>
      writer.write(() => {
        stmt("claimMcpSession").run(session.sessionHash, session.owner, sqliteDate(session.createdAt));
        return row("mcpSessionOwner", session.sessionHash)![0] as string;
      }),
    releaseMcpSession: (sessionHash) => writer.write(() => void stmt("releaseMcpSession").run(sessionHash)),

    async close() {
      await writer.drain();
      connection?.close();
      connection = undefined;
      statements = new Map();
    },
  };
}
