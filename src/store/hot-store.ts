// The per-token store: the few statements every refresh, code exchange, token validation, client
// lookup, upstream re-check and MCP session binding runs, as hand-written SQL prepared once (Prisma
// costs ~10 ms of CPU per refresh here; these statements ~0.3 ms). Prisma still owns the schema,
// the migrations, the row types below and every cold path; the rows written here are exactly the
// rows Prisma writes (same columns, same date encoding), so either side reads the other's.
// One implementation per database: hot-store-sqlite.ts, hot-store-postgres.ts.
import type { AccessToken, AuditEvent, AuthorizationCode, Client, Grant, McpSession, RefreshToken, UpstreamSession } from "./generated/sqlite/client.ts";
import type { DatabaseKind } from "../config/database-kind.ts";
import type { AccessTokenWithGrant, CodeWithGrant, RefreshTokenWithGrant, UpstreamSessionState } from "./hot-rows.ts";

export type { AccessToken, AuditEvent, AuthorizationCode, Client, Grant, McpSession, RefreshToken, UpstreamSession };
// The rows the token reads bring: described in hot-rows.ts, next to the columns they select.
export type { AccessTokenWithGrant, CodeWithGrant, RefreshTokenWithGrant, UpstreamSessionState };

/** A grant's use: its idle deadline moves (never its maximum age). */
export interface GrantUse {
  readonly grantId: string;
  readonly lastUsedAt: Date;
  readonly idleExpiresAt: Date;
}

/** The rows one issuance creates: an access token and, unless the client cannot refresh, a refresh token. */
export interface IssuedRows {
  readonly access: AccessToken;
  readonly refresh: RefreshToken | null;
}

/** One refresh token rotation, all or nothing: claim the old token, store the new pair, touch the grant, audit. */
export interface RefreshRotation {
  readonly refreshTokenId: string;
  readonly consumedAt: Date;
  readonly graceUntil: Date;
  readonly issued: IssuedRows & { readonly refresh: RefreshToken };
  readonly use: GrantUse;
  readonly audit: AuditEvent;
}

/** One code exchange, all or nothing: claim the code, touch the grant, store the tokens, audit. */
export interface CodeExchange {
  readonly codeId: string;
  readonly consumedAt: Date;
  readonly issued: IssuedRows;
  readonly use: GrantUse;
  readonly audit: AuditEvent;
}

/** What an upstream re-check records (the identity only when the access rules read it again and it changed). */
export interface UpstreamCheck {
  readonly lastCheckedAt: Date;
  readonly accessExpiresAt: Date | null;
  /** The identity columns; `facts` is the JSON of grants/stored-facts.ts. */
  readonly facts?: { readonly login: string; readonly email: string | null; readonly profile: string; readonly facts: string } | undefined;
}

/** What was revoked after a moment: whole grants, and single access tokens of grants still live. */
export interface RecentRevocations {
  readonly grants: ReadonlyArray<{ readonly id: string; readonly revokedAt: Date }>;
  readonly tokens: ReadonlyArray<{ readonly tokenHash: string; readonly revokedAt: Date }>;
}

/** Revoked grants and single access tokens (hashes), as announced between instances. */
export interface AnnouncedRevocation {
  readonly grantIds?: readonly string[];
  readonly tokenHashes?: readonly string[];
}

export interface HotStore {
  readonly kind: DatabaseKind;
  clientById(id: string): Promise<Client | null>;
  /** Records a client's use (lastUsedAt). */
  touchClient(id: string, at: Date): Promise<void>;

  refreshTokenByHash(tokenHash: string): Promise<RefreshTokenWithGrant | null>;
  refreshTokenById(id: string): Promise<RefreshToken | null>;
  /** False when the token was no longer claimable (consumed or revoked meanwhile): nothing was written. */
  rotateRefreshToken(rotation: RefreshRotation): Promise<boolean>;

  codeByHash(codeHash: string): Promise<CodeWithGrant | null>;
  /** False when the code was already consumed: nothing was written. */
  exchangeCode(exchange: CodeExchange): Promise<boolean>;

  accessTokenByHash(tokenHash: string): Promise<AccessTokenWithGrant | null>;
  /** Moves the idle deadline of a grant that is still live at `use.lastUsedAt`; a dead one stays dead. */
  recordGrantUse(use: GrantUse): Promise<void>;

  upstreamSessionById(id: string): Promise<UpstreamSession | null>;
  recordUpstreamCheck(id: string, check: UpstreamCheck): Promise<void>;

  /** Polled by every instance twice a second (revocation-feed.ts): cheap when nothing changed. */
  revokedSince(since: Date): Promise<RecentRevocations>;

  /**
   * Tells every instance sharing the database at once (PostgreSQL NOTIFY). On SQLite nothing: the
   * instances of one file poll it (revokedSince), which costs microseconds there.
   */
  announceRevocation(revocation: AnnouncedRevocation): Promise<void>;
  /** Hears other instances' announcements (and this one's) until the returned function is called. */
  listenForRevocations(listener: (revocation: AnnouncedRevocation) => void, onError: (err: unknown) => void): () => Promise<void>;

  /**
   * Records a client assertion's use (its key: client and jti) until it expires: true when this is
   * its first use, or the only earlier one has expired; false when it was used already. On every
   * instance sharing the database, one claim wins.
   */
  claimAssertion(key: string, expiresAt: Date, now: Date): Promise<boolean>;

  mcpSessionOwner(sessionHash: string): Promise<string | null>;
  /** Binds the session unless it is bound already (first claim wins); returns the owner bound afterwards. */
  claimMcpSession(session: McpSession): Promise<string>;
  releaseMcpSession(sessionHash: string): Promise<void>;

  /** Waits for writes in flight, then closes the connections. */
  close(): Promise<void>;
}
