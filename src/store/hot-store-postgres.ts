// The hot store on PostgreSQL: `pg` with named statements (parsed and planned once per connection)
// and each multi-row step as one statement: a refresh rotation or a code exchange is a single
// data-modifying CTE, atomic on its own, and those of one event-loop turn are committed together,
// as the reads before them are sent together (pg-group-commit.ts). Timestamps are `timestamp(3)` holding UTC
// as Prisma writes them: parameters are ISO strings (the zone is ignored by that type) and values
// read back are parsed as UTC whatever the server's or this process's time zone.
import pg from "pg";
import type { AnnouncedRevocation, HotStore, UpstreamCheck } from "./hot-store.ts";
import {
  accessTokenWithGrantColumns,
  codeWithGrantColumns,
  columnList,
  decodeAccessTokenWithGrant,
  decodeCodeWithGrant,
  decodeRefreshTokenWithGrant,
  decodeRow,
  refreshTokenWithGrantColumns,
  rowValues,
  tables,
  type Table,
} from "./hot-rows.ts";
import { dateText } from "./date-text.ts";
import { pgGroupCommit } from "./pg-group-commit.ts";
import { preparedExecutions, preparedRows, type Execution } from "./pg-prepared-query.ts";

const TIMESTAMP_WITHOUT_TIME_ZONE = 1114;
/** Type parsers that read timestamp(3) as UTC whatever the server's or this process's zone. */
export const utcTypes = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === TIMESTAMP_WITHOUT_TIME_ZONE
      ? (value: string) => new Date(`${value.replace(" ", "T")}Z`)
      : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
};

const asDate = (value: unknown) => value as Date;
const encode = <Row>(t: Table<Row>, row: Row) => rowValues(t, row, dateText);
const cast = (kind: "date" | "text") => (kind === "date" ? "timestamp(3)" : "text");
/** `$start::type, …` for every column of `t`, in column order. */
const placeholders = <Row>(t: Table<Row>, start: number) => t.columns.map((c, i) => `$${start + i}::${cast(t.kinds[c])}`).join(", ");
const columnNames = <Row>(t: Table<Row>) => t.columns.map((c) => `"${c}"`).join(", ");
const insertFromClaim = <Row>(t: Table<Row>, start: number, condition = "") =>
  `INSERT INTO "${t.name}" (${columnNames(t)}) SELECT ${placeholders(t, start)} FROM claimed ${condition} RETURNING 1`;

const { client, upstreamSession, accessToken, refreshToken, auditEvent } = tables;

/**
 * Parameter layout of a rotation and of a code exchange: $1 the claimed row's id, $2 consumedAt, $3
 * graceUntil (rotation) or whether there is a refresh token (exchange), then the rows to write.
 */
const LAYOUT = (() => {
  const refresh = 4;
  const access = refresh + refreshToken.columns.length;
  const use = access + accessToken.columns.length;
  const audit = use + 3;
  return { refresh, access, use, audit };
})();

const useClaimedGrant = (at: number) =>
  `UPDATE "Grant" SET "lastUsedAt" = $${at + 1}::timestamp(3), "idleExpiresAt" = $${at + 2}::timestamp(3) WHERE "id" = $${at}::text AND EXISTS (SELECT 1 FROM claimed) RETURNING 1`;

export const SQL = {
  clientById: `SELECT ${columnList(client, "c")} FROM "Client" AS "c" WHERE "c"."id" = $1`,
  touchClient: `UPDATE "Client" SET "lastUsedAt" = $1::timestamp(3) WHERE "id" = $2`,
  refreshTokenByHash: `SELECT ${refreshTokenWithGrantColumns()} WHERE "r"."tokenHash" = $1`,
  refreshTokenById: `SELECT ${columnList(refreshToken, "r")} FROM "RefreshToken" AS "r" WHERE "r"."id" = $1`,
  rotateRefreshToken: `WITH claimed AS (
      UPDATE "RefreshToken" SET "consumedAt" = $2::timestamp(3), "graceUntil" = $3::timestamp(3), "firstUsedAt" = COALESCE("firstUsedAt", $2::timestamp(3)),
        "successorId" = $${LAYOUT.refresh}::text
      WHERE "id" = $1::text AND "consumedAt" IS NULL AND "revokedAt" IS NULL RETURNING "id"
    ), new_refresh AS (${insertFromClaim(refreshToken, LAYOUT.refresh)}
    ), new_access AS (${insertFromClaim(accessToken, LAYOUT.access)}
    ), used AS (${useClaimedGrant(LAYOUT.use)}
    ), audited AS (${insertFromClaim(auditEvent, LAYOUT.audit)}
    ) SELECT count(*)::int FROM claimed`,
  codeByHash: `SELECT ${codeWithGrantColumns()} WHERE "a"."codeHash" = $1`,
  exchangeCode: `WITH claimed AS (
      UPDATE "AuthorizationCode" SET "consumedAt" = $2::timestamp(3) WHERE "id" = $1::text AND "consumedAt" IS NULL RETURNING "id"
    ), used AS (${useClaimedGrant(LAYOUT.use)}
    ), new_refresh AS (${insertFromClaim(refreshToken, LAYOUT.refresh, "WHERE $3::boolean")}
    ), new_access AS (${insertFromClaim(accessToken, LAYOUT.access)}
    ), audited AS (${insertFromClaim(auditEvent, LAYOUT.audit)}
    ) SELECT count(*)::int FROM claimed`,
  accessTokenByHash: `SELECT ${accessTokenWithGrantColumns()} WHERE "a"."tokenHash" = $1`,
  useLiveGrant: `UPDATE "Grant" SET "lastUsedAt" = $1::timestamp(3), "idleExpiresAt" = $2::timestamp(3)
    WHERE "id" = $3 AND "revokedAt" IS NULL AND "idleExpiresAt" > $1::timestamp(3)`,
  upstreamSessionById: `SELECT ${columnList(upstreamSession, "u")} FROM "UpstreamSession" AS "u" WHERE "u"."id" = $1`,
  recordCheck: `UPDATE "UpstreamSession" SET "lastCheckedAt" = $1::timestamp(3), "accessExpiresAt" = $2::timestamp(3), "updatedAt" = $3::timestamp(3) WHERE "id" = $4`,
  recordCheckWithFacts: `UPDATE "UpstreamSession" SET "lastCheckedAt" = $1::timestamp(3), "accessExpiresAt" = $2::timestamp(3), "updatedAt" = $3::timestamp(3),
    "login" = $4, "email" = $5, "profile" = $6, "facts" = $7 WHERE "id" = $8`,
  revokedGrants: `SELECT "id", "revokedAt" FROM "Grant" WHERE "revokedAt" > $1::timestamp(3)`,
  // The grant as a subquery: as a join, SQLite walked every live grant's tokens (2.4 ms at 8,000
  // tokens, growing) instead of the few recently revoked ones through the revokedAt index.
  revokedTokens: `SELECT "a"."tokenHash", "a"."revokedAt" FROM "AccessToken" AS "a"
    WHERE "a"."revokedAt" > $1::timestamp(3) AND (SELECT "g"."revokedAt" FROM "Grant" AS "g" WHERE "g"."id" = "a"."grantId") IS NULL`,
  // A row past its expiry is as good as none (the sweep has not removed it yet): taken over. A
  // concurrent claim of the same key waits for this one and then finds the conflict.
  claimAssertion: `INSERT INTO "UsedAssertion" ("key", "expiresAt") VALUES ($1, $2::timestamp(3))
    ON CONFLICT ("key") DO UPDATE SET "expiresAt" = EXCLUDED."expiresAt" WHERE "UsedAssertion"."expiresAt" <= $3::timestamp(3) RETURNING 1`,
  mcpSessionOwner: `SELECT "owner" FROM "McpSession" WHERE "sessionHash" = $1`,
  // When another transaction inserted the row after this statement's snapshot, neither branch
  // sees it; the caller then reads it with a fresh statement.
  claimMcpSession: `WITH inserted AS (
      INSERT INTO "McpSession" ("sessionHash", "owner", "createdAt") VALUES ($1, $2, $3::timestamp(3)) ON CONFLICT ("sessionHash") DO NOTHING RETURNING "owner"
    ) SELECT "owner" FROM inserted UNION ALL SELECT "owner" FROM "McpSession" WHERE "sessionHash" = $1 LIMIT 1`,
  releaseMcpSession: `DELETE FROM "McpSession" WHERE "sessionHash" = $1`,
  announce: `SELECT pg_notify('mab_revocations', $1)`,
} as const;

type StatementName = keyof typeof SQL;

const REVOCATION_CHANNEL = "mab_revocations";
/**
 * Ids per notification: a payload must stay under PostgreSQL's 8,000 bytes. A grant id is 36
 * characters, a token's key 76 (64 for tokens minted before stamps): 90 keys make 7,128 bytes.
 */
const IDS_PER_NOTIFICATION = 90;
const RELISTEN_MS = 1000;

function chunks<T>(items: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += IDS_PER_NOTIFICATION) out.push(items.slice(i, i + IDS_PER_NOTIFICATION));
  return out;
}

const isStrings = (value: unknown): value is string[] => Array.isArray(value) && value.every((v) => typeof v === "string");

/** A notification's payload, or null when it is not one of ours (anyone with access may NOTIFY). */
function parseAnnouncement(payload: string | undefined): AnnouncedRevocation | null {
  try {
    const parsed = JSON.parse(payload ?? "") as { grantIds?: unknown; tokenHashes?: unknown };
    const grantIds = parsed.grantIds ?? [];
    const tokenHashes = parsed.tokenHashes ?? [];
    return isStrings(grantIds) && isStrings(tokenHashes) ? { grantIds, tokenHashes } : null;
  } catch {
    return null;
  }
}

/**
 * One connection of its own LISTENing (a pooled one would be handed to queries); when it drops it
 * is opened again after a second. Announcements made meanwhile reach this instance by its poll.
 */
function listen(url: string, listener: (revocation: AnnouncedRevocation) => void, onError: (err: unknown) => void): () => Promise<void> {
  let client: pg.Client | undefined;
  let stopped = false;
  let retry: NodeJS.Timeout | undefined;
  const again = () => {
    client = undefined;
    if (stopped || retry) return;
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, RELISTEN_MS);
    retry.unref();
  };
  const connect = async () => {
    const c = new pg.Client({ connectionString: url });
    c.on("notification", (message) => {
      const revocation = parseAnnouncement(message.payload);
      if (revocation) listener(revocation);
    });
    c.on("error", (err) => {
      onError(err);
      again();
    });
    c.on("end", again);
    try {
      await c.connect();
      await c.query(`LISTEN ${REVOCATION_CHANNEL}`);
    } catch (err) {
      onError(err);
      await c.end().catch(() => undefined);
      return;
    }
    if (stopped) await c.end().catch(() => undefined);
    else client = c;
  };
  void connect();
  return async () => {
    stopped = true;
    if (retry) clearTimeout(retry);
    await client?.end().catch(() => undefined);
  };
}

/**
 * The ways a statement is run: all rows (as arrays), the first row, for its effect only, the first
 * row of a write committed with the others of its event-loop turn (its lock order: the grant), or
 * of a read sent with the others of its turn.
 */
interface Statements {
  rows(name: StatementName, values: unknown[]): Promise<unknown[][]>;
  first(name: StatementName, values: unknown[]): Promise<unknown[] | undefined>;
  run(name: StatementName, values: unknown[]): Promise<void>;
  grouped(name: StatementName, values: unknown[], grantId: string): Promise<unknown[] | undefined>;
  /** The first row of a read sent with the others of its event-loop turn. */
  groupedRead(name: StatementName, values: unknown[]): Promise<unknown[] | undefined>;
}

const nullableDateText = (date: Date | null) => (date ? dateText(date) : null);

/** What a token's validation reads besides the token: its client and its upstream session. */
function clientAndSessionMethods({ first, run }: Statements) {
  return {
    async clientById(id) {
      const values = await first("clientById", [id]);
      return values ? decodeRow(client, values, 0, asDate) : null;
    },
    touchClient: (id, at) => run("touchClient", [dateText(at), id]),

    async upstreamSessionById(id) {
      const values = await first("upstreamSessionById", [id]);
      return values ? decodeRow(upstreamSession, values, 0, asDate) : null;
    },
    async recordUpstreamCheck(id, check: UpstreamCheck) {
      const common = [dateText(check.lastCheckedAt), nullableDateText(check.accessExpiresAt), dateText(new Date())];
      if (check.facts) await run("recordCheckWithFacts", [...common, check.facts.login, check.facts.email, check.facts.profile, check.facts.facts, id]);
      else await run("recordCheck", [...common, id]);
    },
  } satisfies Partial<HotStore>;
}

/** Codes and tokens: read by hash, and each exchange or rotation as one statement. */
function tokenMethods({ first, run, grouped, groupedRead }: Statements) {
  return {
    async refreshTokenByHash(tokenHash) {
      const values = await groupedRead("refreshTokenByHash", [tokenHash]);
      return values ? decodeRefreshTokenWithGrant(values, asDate) : null;
    },
    async refreshTokenById(id) {
      const values = await first("refreshTokenById", [id]);
      return values ? decodeRow(refreshToken, values, 0, asDate) : null;
    },
    async rotateRefreshToken(r) {
      const [claimed] = (await grouped(
        "rotateRefreshToken",
        [
          r.refreshTokenId,
          dateText(r.consumedAt),
          dateText(r.graceUntil),
          ...encode(refreshToken, r.issued.refresh),
          ...encode(accessToken, r.issued.access),
          r.use.grantId,
          dateText(r.use.lastUsedAt),
          dateText(r.use.idleExpiresAt),
          ...encode(auditEvent, r.audit),
        ],
        r.use.grantId,
      ))!;
      return claimed === 1;
    },

    async codeByHash(codeHash) {
      const values = await groupedRead("codeByHash", [codeHash]);
      return values ? decodeCodeWithGrant(values, asDate) : null;
    },
    async exchangeCode(e) {
      const refresh = e.issued.refresh ? encode(refreshToken, e.issued.refresh) : refreshToken.columns.map(() => null);
      const [claimed] = (await grouped(
        "exchangeCode",
        [
          e.codeId,
          dateText(e.consumedAt),
          e.issued.refresh !== null,
          ...refresh,
          ...encode(accessToken, e.issued.access),
          e.use.grantId,
          dateText(e.use.lastUsedAt),
          dateText(e.use.idleExpiresAt),
          ...encode(auditEvent, e.audit),
        ],
        e.use.grantId,
      ))!;
      return claimed === 1;
    },

    async accessTokenByHash(tokenHash) {
      const values = await first("accessTokenByHash", [tokenHash]);
      return values ? decodeAccessTokenWithGrant(values, asDate) : null;
    },
    recordGrantUse: (use) => run("useLiveGrant", [dateText(use.lastUsedAt), dateText(use.idleExpiresAt), use.grantId]),
  } satisfies Partial<HotStore>;
}

/** Revocations other instances must hear of: polled, and announced with NOTIFY. */
function revocationMethods({ rows, run }: Statements, url: string) {
  return {
    async revokedSince(since) {
      const [grants, tokens] = await Promise.all([rows("revokedGrants", [dateText(since)]), rows("revokedTokens", [dateText(since)])]);
      return {
        grants: (grants as Array<[string, Date]>).map(([id, revokedAt]) => ({ id, revokedAt })),
        tokens: (tokens as Array<[string, Date]>).map(([tokenHash, revokedAt]) => ({ tokenHash, revokedAt })),
      };
    },

    async announceRevocation(revocation) {
      const messages = [
        ...chunks(revocation.grantIds ?? []).map((grantIds) => ({ grantIds })),
        ...chunks(revocation.tokenHashes ?? []).map((tokenHashes) => ({ tokenHashes })),
      ];
      for (const message of messages) await run("announce", [JSON.stringify(message)]);
    },
    listenForRevocations: (listener, onError) => listen(url, listener, onError),
  } satisfies Partial<HotStore>;
}

/** Claims every instance sharing the database agrees on: a client assertion's one use, an MCP session's owner. */
function claimMethods({ rows, first, run }: Statements) {
  return {
    async claimAssertion(key, expiresAt, now) {
      return (await rows("claimAssertion", [key, dateText(expiresAt), dateText(now)])).length === 1;
    },

    async mcpSessionOwner(sessionHash) {
      return ((await first("mcpSessionOwner", [sessionHash]))?.[0] as string | undefined) ?? null;
    },
    async claimMcpSession(session) {
      const bound = (await first("claimMcpSession", [session.sessionHash, session.owner, dateText(session.createdAt)]))?.[0] as string | undefined;
      if (bound !== undefined) return bound;
      const owner = (await first("mcpSessionOwner", [session.sessionHash]))?.[0] as string | undefined;
      if (owner === undefined) throw new Error("MCP session claim found neither its own row nor another's");
      return owner;
    },
    releaseMcpSession: (sessionHash) => run("releaseMcpSession", [sessionHash]),
  } satisfies Partial<HotStore>;
}

export function createPostgresHotStore(url: string): HotStore {
  // allowExitOnIdle: idle connections never keep a process (a CLI command, a test) alive by themselves.
  const pool = new pg.Pool({ connectionString: url, types: utcTypes, max: 10, allowExitOnIdle: true });
  // A connection the server cut while idle (restart, failover) is dropped by the pool and
  // reported here; the next query opens a new one. Without a listener it would end the process.
  pool.on("error", () => undefined);

  const rows = (name: StatementName, values: unknown[]): Promise<unknown[][]> => preparedRows(pool, utcTypes, name, SQL[name], values);
  const executions = (list: readonly Execution[]) => preparedExecutions(pool, utcTypes, list);
  // Apart: a read never waits for a commit, nor a write for a read of another request.
  const writesOfTurn = pgGroupCommit(executions);
  const readsOfTurn = pgGroupCommit(executions);
  const statements: Statements = {
    rows,
    first: async (name, values) => (await rows(name, values))[0],
    run: async (name, values) => void (await rows(name, values)),
    grouped: async (name, values, grantId) => (await writesOfTurn({ name, text: SQL[name], values, lockKey: grantId }))[0],
    groupedRead: async (name, values) => (await readsOfTurn({ name, text: SQL[name], values, lockKey: "" }))[0],
  };

  return {
    kind: "postgres",
    ...clientAndSessionMethods(statements),
    ...tokenMethods(statements),
    ...revocationMethods(statements, url),
    ...claimMethods(statements),
    async close() {
      await pool.end();
    },
  };
}
