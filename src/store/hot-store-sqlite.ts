// The hot store on SQLite: the `libsql` package's synchronous API (the engine under Prisma's
// adapter, without the async client around it), statements prepared once per connection. Reads run
// at once on this thread's connection, and writes are committed on it too, grouped per event-loop
// turn (sqlite-writer.ts). Nothing read or written reaches a caller before it is on disk
// (wal-flush.ts).
import type { HotStore } from "./hot-store.ts";
import { decodeAccessTokenWithGrant, decodeCodeWithGrant, decodeRefreshTokenWithGrant, decodeRow, tables } from "./hot-rows.ts";
import { dateText } from "./date-text.ts";
import { HotConnection, readDate, readSettings, type SqliteConnectionSettings, type StatementName } from "./sqlite-hot-sql.ts";
import { SqliteWriter } from "./sqlite-writer.ts";
import { sqliteWriteGate } from "./sqlite-write-gate.ts";
import { WalFlush, type FlushFile } from "./wal-flush.ts";

export type { SqliteConnectionSettings } from "./sqlite-hot-sql.ts";

const { client, upstreamSession, refreshToken } = tables;

/** The SQLite hot store, with what tests and the benchmark look at besides the HotStore interface. */
export type SqliteHotStore = HotStore & {
  readonly stats: SqliteWriter["stats"] & WalFlush["stats"];
  /** The settings of both connections: this thread's and the writer thread's. */
  connectionSettings(): Promise<{ readonly reader: SqliteConnectionSettings; readonly writer: SqliteConnectionSettings }>;
  /** See SqliteWriter.crashForTest. */
  crashWriterForTest(): Promise<void>;
};

/** Reads on this thread's connection, and the writer, which commits on it. */
interface Connections {
  readonly reader: HotConnection;
  readonly writer: SqliteWriter;
  /** Runs a read; a connection that turned read-only is dropped so the next read reopens it. */
  read<T>(work: () => T): Promise<T>;
  row(name: StatementName, ...params: unknown[]): unknown[] | undefined;
  /** A joined read's first row (HotConnection.jsonRow). */
  jsonRow(name: StatementName, ...params: unknown[]): unknown[] | undefined;
}

/** What a token's validation reads besides the token: its client and its upstream session. */
function clientAndSessionMethods({ read, row, writer }: Connections) {
  return {
    clientById: (id) =>
      read(() => {
        const values = row("clientById", id);
        return values ? decodeRow(client, values, 0, readDate) : null;
      }),
    touchClient: (id, at) => writer.write("touchClient", id, at),

    upstreamSessionById: (id) =>
      read(() => {
        const values = row("upstreamSessionById", id);
        return values ? decodeRow(upstreamSession, values, 0, readDate) : null;
      }),
    recordUpstreamCheck: (id, check) => writer.write("recordUpstreamCheck", id, check, new Date()),
  } satisfies Partial<HotStore>;
}

/** Codes and tokens: read by hash here, exchanged and rotated on the writer thread. */
function tokenMethods({ read, row, jsonRow, writer }: Connections) {
  return {
    refreshTokenByHash: (tokenHash) =>
      read(() => {
        const values = jsonRow("refreshTokenByHash", tokenHash);
        return values ? decodeRefreshTokenWithGrant(values, readDate) : null;
      }),
    refreshTokenById: (id) =>
      read(() => {
        const values = row("refreshTokenById", id);
        return values ? decodeRow(refreshToken, values, 0, readDate) : null;
      }),
    rotateRefreshToken: (r) => writer.write("rotateRefreshToken", r),

    codeByHash: (codeHash) =>
      read(() => {
        const values = jsonRow("codeByHash", codeHash);
        return values ? decodeCodeWithGrant(values, readDate) : null;
      }),
    exchangeCode: (e) => writer.write("exchangeCode", e),

    accessTokenByHash: (tokenHash) =>
      read(() => {
        const values = jsonRow("accessTokenByHash", tokenHash);
        return values ? decodeAccessTokenWithGrant(values, readDate) : null;
      }),
    recordGrantUse: (use) => writer.write("recordGrantUse", use),
  } satisfies Partial<HotStore>;
}

/** Revocations are polled: the instances of one file need no announcement. Then the claims every instance agrees on. */
function revocationAndClaimMethods({ read, row, reader, writer }: Connections) {
  return {
    revokedSince: (since) =>
      read(() => {
        const at = dateText(since);
        const rows = (name: StatementName) => reader.stmt(name).all(at) as Array<[string, string]>;
        return {
          grants: rows("revokedGrants").map(([id, revokedAt]) => ({ id, revokedAt: readDate(revokedAt) })),
          tokens: rows("revokedTokens").map(([tokenHash, revokedAt]) => ({ tokenHash, revokedAt: readDate(revokedAt) })),
        };
      }),

    announceRevocation: async () => undefined,
    listenForRevocations: () => async () => undefined,

    claimAssertion: (key, expiresAt, now) => writer.write("claimAssertion", key, expiresAt, now),

    mcpSessionOwner: (sessionHash) => read(() => (row("mcpSessionOwner", sessionHash)?.[0] as string | undefined) ?? null),
    claimMcpSession: (session) => writer.write("claimMcpSession", session),
    releaseMcpSession: (sessionHash) => writer.write("releaseMcpSession", sessionHash),
  } satisfies Partial<HotStore>;
}

/** `flushFile`: for tests, to decide when a flush of the WAL ends (fs.fdatasync otherwise). */
export function createSqliteHotStore(file: string, flushFile?: FlushFile): SqliteHotStore {
  const flush = new WalFlush(`${file}-wal`, flushFile);
  const reader = new HotConnection(file, { onEventLoop: true, onClose: () => flush.reopen() });
  const writer = new SqliteWriter(file, sqliteWriteGate(file), reader, flush);
  const connections: Connections = {
    reader,
    writer,
    read: <T>(work: () => T): Promise<T> => {
      try {
        return flush.settled(work());
      } catch (err) {
        reader.dropIfReadOnly(err);
        return Promise.reject(err);
      }
    },
    row: (name, ...params) => reader.row(name, ...params),
    jsonRow: (name, ...params) => reader.jsonRow(name, ...params),
  };

  return {
    kind: "sqlite",
    get stats() {
      return { ...writer.stats, ...flush.stats };
    },
    async connectionSettings() {
      return { reader: readSettings(reader.db()), writer: await writer.connectionSettings() };
    },
    crashWriterForTest: () => writer.crashForTest(),
    ...clientAndSessionMethods(connections),
    ...tokenMethods(connections),
    ...revocationAndClaimMethods(connections),
    async close() {
      await writer.close();
      reader.close();
    },
  };
}
