// The hot store's SQL on SQLite and the connection it runs on, shared by the event-loop thread
// (reads, and most writes) and the writer thread (sqlite-writer-thread.ts): statements prepared
// once per connection, dates encoded as Prisma's libsql adapter writes them (ISO 8601 with
// "+00:00"), so comparisons in SQL and Prisma's reads agree on rows from either side.
import Database from "libsql";
import {
  accessTokenWithGrantColumns,
  codeWithGrantColumns,
  columnList,
  refreshTokenWithGrantColumns,
  rowValues,
  type SelectColumns,
  tables,
  type Table,
} from "./hot-rows.ts";
import { dateText } from "./date-text.ts";
import { SQLITE_CONNECTION_PRAGMAS, SQLITE_EVENT_LOOP_PRAGMAS } from "./sqlite-pragmas.ts";

export const readDate = (value: unknown): Date => new Date(value as string);
export const encode = <Row>(t: Table<Row>, row: Row) => rowValues(t, row, dateText);
const insert = <Row>(t: Table<Row>) => `INSERT INTO "${t.name}" (${t.columns.map((c) => `"${c}"`).join(", ")}) VALUES (${t.columns.map(() => "?").join(", ")})`;

const { client, upstreamSession, accessToken, refreshToken, auditEvent } = tables;

/**
 * The joined reads of the token endpoint and of access-token validation (45 columns) select one
 * JSON array instead of a value per column: the driver then makes one string instead of 45 values
 * set one by one into an array (each through N-API's generic element store, about 1,100
 * instructions apiece under callgrind), and JSON.parse builds the array in one pass. On a copy of
 * the bench database the refresh read took 11–15 µs of CPU this way against 15–20 µs. Every column
 * read so is text or null (dates are ISO text), which JSON keeps exactly.
 */
const asOneJsonArray: SelectColumns = (columns) => `json_array(${columns})`;

export const SQL = {
  clientById: `SELECT ${columnList(client, "c")} FROM "Client" AS "c" WHERE "c"."id" = ?`,
  touchClient: `UPDATE "Client" SET "lastUsedAt" = ? WHERE "id" = ?`,
  refreshTokenByHash: `SELECT ${refreshTokenWithGrantColumns(asOneJsonArray)} WHERE "r"."tokenHash" = ?`,
  refreshTokenById: `SELECT ${columnList(refreshToken, "r")} FROM "RefreshToken" AS "r" WHERE "r"."id" = ?`,
  claimRefreshToken: `UPDATE "RefreshToken" SET "consumedAt" = ?, "graceUntil" = ?, "firstUsedAt" = COALESCE("firstUsedAt", ?), "successorId" = ? WHERE "id" = ? AND "consumedAt" IS NULL AND "revokedAt" IS NULL`,
  codeByHash: `SELECT ${codeWithGrantColumns(asOneJsonArray)} WHERE "a"."codeHash" = ?`,
  claimCode: `UPDATE "AuthorizationCode" SET "consumedAt" = ? WHERE "id" = ? AND "consumedAt" IS NULL`,
  useGrant: `UPDATE "Grant" SET "lastUsedAt" = ?, "idleExpiresAt" = ? WHERE "id" = ?`,
  useLiveGrant: `UPDATE "Grant" SET "lastUsedAt" = ?, "idleExpiresAt" = ? WHERE "id" = ? AND "revokedAt" IS NULL AND "idleExpiresAt" > ?`,
  insertRefreshToken: insert(refreshToken),
  insertAccessToken: insert(accessToken),
  insertAuditEvent: insert(auditEvent),
  accessTokenByHash: `SELECT ${accessTokenWithGrantColumns(asOneJsonArray)} WHERE "a"."tokenHash" = ?`,
  upstreamSessionById: `SELECT ${columnList(upstreamSession, "u")} FROM "UpstreamSession" AS "u" WHERE "u"."id" = ?`,
  recordCheck: `UPDATE "UpstreamSession" SET "lastCheckedAt" = ?, "accessExpiresAt" = ?, "updatedAt" = ? WHERE "id" = ?`,
  recordCheckWithFacts: `UPDATE "UpstreamSession" SET "lastCheckedAt" = ?, "accessExpiresAt" = ?, "updatedAt" = ?, "login" = ?, "email" = ?, "profile" = ?, "facts" = ? WHERE "id" = ?`,
  revokedGrants: `SELECT "id", "revokedAt" FROM "Grant" WHERE "revokedAt" > ?`,
  // The grant as a subquery: as a join, SQLite walked every live grant's tokens (2.4 ms at 8,000
  // tokens, growing) instead of the few recently revoked ones through the revokedAt index.
  revokedTokens: `SELECT "a"."tokenHash", "a"."revokedAt" FROM "AccessToken" AS "a"
    WHERE "a"."revokedAt" > ? AND (SELECT "g"."revokedAt" FROM "Grant" AS "g" WHERE "g"."id" = "a"."grantId") IS NULL`,
  // A row past its expiry is as good as none (the sweep has not removed it yet): taken over.
  claimAssertion: `INSERT INTO "UsedAssertion" ("key", "expiresAt") VALUES (?, ?)
    ON CONFLICT ("key") DO UPDATE SET "expiresAt" = excluded."expiresAt" WHERE "UsedAssertion"."expiresAt" <= ?`,
  mcpSessionOwner: `SELECT "owner" FROM "McpSession" WHERE "sessionHash" = ?`,
  claimMcpSession: `INSERT INTO "McpSession" ("sessionHash", "owner", "createdAt") VALUES (?, ?, ?) ON CONFLICT ("sessionHash") DO NOTHING`,
  releaseMcpSession: `DELETE FROM "McpSession" WHERE "sessionHash" = ?`,
} as const;

export type StatementName = keyof typeof SQL;

/** SQLITE_READONLY and its extended codes, as libsql reports them: the connection was opened read-only and stays so. */
export function openedReadOnly(err: unknown): boolean {
  const rawCode = (err as { rawCode?: unknown } | null)?.rawCode;
  return typeof rawCode === "number" && (rawCode & 0xff) === 8;
}

/** Where a HotConnection runs: the event loop's has its own settings (SQLITE_EVENT_LOOP_PRAGMAS). */
export interface HotConnectionOptions {
  readonly onEventLoop?: boolean;
  /** Called when the connection closes (the next one may see a new WAL file). */
  readonly onClose?: () => void;
}

/**
 * One libsql connection to the file with the hot store's settings, opened on first use (the file
 * may not be migrated yet when the store is made), and its statements, prepared once each.
 */
export class HotConnection {
  #connection: Database.Database | undefined;
  #statements = new Map<StatementName, Database.Statement>();
  #inWal = false;

  constructor(
    private readonly file: string,
    private readonly options: HotConnectionOptions = {},
  ) {}

  /** The database is in WAL mode (set when the connection opened): what the event loop's settings rely on. */
  get inWal(): boolean {
    this.db();
    return this.#inWal;
  }

  db(): Database.Database {
    if (this.#connection) return this.#connection;
    const opened = new Database(this.file);
    try {
      opened.prepare(SQLITE_CONNECTION_PRAGMAS.withRow).get();
      opened.exec(SQLITE_CONNECTION_PRAGMAS.rowless);
      const [mode] = opened.prepare("PRAGMA journal_mode = WAL").raw(true).get() as [string];
      this.#inWal = mode.toLowerCase() === "wal";
      // Without WAL, synchronous=NORMAL would risk more than the last commits: keep FULL then.
      if (this.options.onEventLoop && this.#inWal) {
        for (const pragma of SQLITE_EVENT_LOOP_PRAGMAS.withRow) opened.prepare(pragma).get();
        opened.exec(SQLITE_EVENT_LOOP_PRAGMAS.rowless);
      }
    } catch (err) {
      opened.close();
      throw err;
    }
    this.#connection = opened;
    return opened;
  }

  /** A statement prepared once per connection, in raw mode (rows as arrays in column order). */
  stmt(name: StatementName): Database.Statement {
    let prepared = this.#statements.get(name);
    if (!prepared) {
      prepared = this.db().prepare(SQL[name]);
      if (prepared.reader) prepared.raw(true);
      this.#statements.set(name, prepared);
    }
    return prepared;
  }

  /** The first row of a statement, as an array in column order. */
  row(name: StatementName, ...params: unknown[]): unknown[] | undefined {
    return this.stmt(name).get(...params) as unknown[] | undefined;
  }

  /** The values of a joined read's first row (one JSON array: see asOneJsonArray), in column order. */
  jsonRow(name: StatementName, ...params: unknown[]): unknown[] | undefined {
    const row = this.row(name, ...params);
    return row === undefined ? undefined : (JSON.parse(row[0] as string) as unknown[]);
  }

  /** After a read-only open, a fresh connection may write again (the file's permissions were fixed). */
  dropIfReadOnly(err: unknown): void {
    if (openedReadOnly(err)) this.close();
  }

  close(): void {
    if (!this.#connection) return;
    this.#connection.close();
    this.#connection = undefined;
    this.#statements = new Map();
    this.options.onClose?.();
  }
}

/** The per-connection settings as SQLite reports them (for tests: every connection must carry them). */
export interface SqliteConnectionSettings {
  readonly busyTimeout: number;
  readonly synchronous: number;
  readonly foreignKeys: number;
  readonly journalMode: string;
  readonly walAutocheckpoint: number;
}

export function readSettings(db: Database.Database): SqliteConnectionSettings {
  const value = (pragma: string) => (db.prepare(`PRAGMA ${pragma}`).raw(true).get() as [number | string])[0];
  return {
    busyTimeout: Number(value("busy_timeout")),
    synchronous: Number(value("synchronous")),
    foreignKeys: Number(value("foreign_keys")),
    journalMode: String(value("journal_mode")),
    walAutocheckpoint: Number(value("wal_autocheckpoint")),
  };
}
