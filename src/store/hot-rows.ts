// The tables the hot store reads and writes, described from Prisma's generated row types: the
// compiler insists on every column, with "date" exactly for the DateTime ones, so a column added to
// the schema (and regenerated) breaks the build here instead of being silently left out. Rows come
// back as arrays in column order (the cheapest shape both drivers give) and become Prisma rows.
import type { AccessToken, AuditEvent, AuthorizationCode, Client, Grant, McpSession, RefreshToken, UpstreamSession } from "./generated/sqlite/client.ts";

type ColumnKinds<Row> = { readonly [K in keyof Row]-?: NonNullable<Row[K]> extends Date ? "date" : "text" };

export interface Table<Row> {
  /** The table's name as Prisma created it (the model's name). */
  readonly name: string;
  readonly columns: readonly (keyof Row & string)[];
  readonly kinds: ColumnKinds<Row>;
  /** Whether each column, in order, is a date: decoding a row looks it up by position. */
  readonly dates: readonly boolean[];
}

function table<Row>(name: string, kinds: ColumnKinds<Row>): Table<Row> {
  const columns = Object.keys(kinds) as (keyof Row & string)[];
  return { name, kinds, columns, dates: columns.map((c) => kinds[c] === "date") };
}

/** The leading columns access and refresh tokens share, in the order both tables have them. */
const issuedTokenColumns = {
  id: "text",
  tokenHash: "text",
  prefix: "text",
  grantId: "text",
  clientId: "text",
  resource: "text",
  scope: "text",
} as const;

export const tables = {
  client: table<Client>("Client", {
    id: "text",
    secretHash: "text",
    secretPrefix: "text",
    redirectUris: "text",
    tokenEndpointAuthMethod: "text",
    fallbackAuthMethod: "text",
    jwksUri: "text",
    jwks: "text",
    signingAlg: "text",
    grantTypes: "text",
    responseTypes: "text",
    scope: "text",
    clientName: "text",
    clientUri: "text",
    logoUri: "text",
    softwareId: "text",
    softwareVersion: "text",
    applicationType: "text",
    registrationType: "text",
    createdAt: "date",
    lastUsedAt: "date",
  }),
  grant: table<Grant>("Grant", {
    id: "text",
    clientId: "text",
    upstreamSessionId: "text",
    subject: "text",
    kind: "text",
    resource: "text",
    scope: "text",
    createdAt: "date",
    lastUsedAt: "date",
    idleExpiresAt: "date",
    absoluteExpiresAt: "date",
    revokedAt: "date",
    revokedReason: "text",
  }),
  upstreamSession: table<UpstreamSession>("UpstreamSession", {
    id: "text",
    provider: "text",
    subject: "text",
    login: "text",
    email: "text",
    profile: "text",
    facts: "text",
    accessTokenEnc: "text",
    refreshTokenEnc: "text",
    idTokenEnc: "text",
    scope: "text",
    accessExpiresAt: "date",
    lastCheckedAt: "date",
    status: "text",
    revokedAt: "date",
    revokedReason: "text",
    createdAt: "date",
    updatedAt: "date",
  }),
  authorizationCode: table<AuthorizationCode>("AuthorizationCode", {
    id: "text",
    codeHash: "text",
    grantId: "text",
    clientId: "text",
    redirectUri: "text",
    codeChallenge: "text",
    resource: "text",
    scope: "text",
    createdAt: "date",
    expiresAt: "date",
    consumedAt: "date",
  }),
  accessToken: table<AccessToken>("AccessToken", {
    ...issuedTokenColumns,
    refreshTokenId: "text",
    createdAt: "date",
    expiresAt: "date",
    revokedAt: "date",
  }),
  refreshToken: table<RefreshToken>("RefreshToken", {
    ...issuedTokenColumns,
    parentId: "text",
    successorId: "text",
    createdAt: "date",
    expiresAt: "date",
    consumedAt: "date",
    graceUntil: "date",
    firstUsedAt: "date",
    revokedAt: "date",
  }),
  mcpSession: table<McpSession>("McpSession", { sessionHash: "text", owner: "text", createdAt: "date" }),
  auditEvent: table<AuditEvent>("AuditEvent", {
    id: "text",
    at: "date",
    type: "text",
    clientId: "text",
    grantId: "text",
    subject: "text",
    ip: "text",
    detail: "text",
    deliveredAt: "date",
  }),
} as const;

/** The row a table (or a view of one) decodes to. */
type RowOf<T> = T extends Table<infer Row> ? Row : never;

/**
 * A table read in part: the named columns, in the table's order. A read that leaves out the columns
 * its caller never looks at costs less: each column the driver hands over is a value made on the
 * event-loop thread (a string, a date parsed), and the refresh grant's read had 67 of them.
 */
function view<Row, K extends keyof Row & string>(t: Table<Row>, keep: readonly K[]): Table<Pick<Row, K>> {
  const kinds = Object.fromEntries(t.columns.filter((c): c is K => (keep as readonly string[]).includes(c)).map((c) => [c, t.kinds[c]]));
  return table<Pick<Row, K>>(t.name, kinds as ColumnKinds<Pick<Row, K>>);
}

/**
 * What the token endpoint reads of the upstream session behind a grant on every refresh: enough to
 * tell whether a re-check is due and, when it is not, the facts the access rules decide by. The
 * encrypted upstream tokens and the rest are read only when a re-check is due
 * (grants/upstream-sessions.ts reads the whole row then).
 */
export const upstreamSessionState = view(tables.upstreamSession, ["id", "subject", "login", "facts", "lastCheckedAt", "status"]);
export type UpstreamSessionState = RowOf<typeof upstreamSessionState>;

/** What a refresh reads of its token: the claim's checks and the new pair's fields (a retry reads the whole row by id). */
export const refreshTokenClaim = view(tables.refreshToken, ["id", "grantId", "clientId", "resource", "scope", "expiresAt", "consumedAt", "revokedAt"]);
export type RefreshTokenClaim = RowOf<typeof refreshTokenClaim>;

/** What a refresh or a code exchange reads of the grant: its deadlines, its user and upstream session, what the new tokens copy. */
export const grantOfToken = view(tables.grant, [
  "id",
  "clientId",
  "upstreamSessionId",
  "subject",
  "resource",
  "scope",
  "idleExpiresAt",
  "absoluteExpiresAt",
  "revokedAt",
  "revokedReason",
]);
export type GrantOfToken = RowOf<typeof grantOfToken>;

/** What a code exchange reads of its code: every check of the exchange, and what the tokens copy. */
export const codeClaim = view(tables.authorizationCode, [
  "id",
  "grantId",
  "clientId",
  "redirectUri",
  "codeChallenge",
  "resource",
  "scope",
  "expiresAt",
  "consumedAt",
]);
export type CodeClaim = RowOf<typeof codeClaim>;

/**
 * A refresh token as the refresh grant needs it: its grant and the state of the upstream session
 * behind the grant (the grant checks that session), in one read.
 */
export type RefreshTokenWithGrant = RefreshTokenClaim & {
  /** The token's client, read with it: a refresh authenticates the client from this row. */
  readonly client: Client;
  readonly grant: GrantOfToken & { readonly upstreamSession: UpstreamSessionState | null };
};

/** An authorization code as the code exchange needs it: its grant, and its client (the exchange authenticates the client from this row). */
export type CodeWithGrant = CodeClaim & { readonly grant: GrantOfToken; readonly client: Client };

/**
 * An access token as validation needs it: its grant, the client's kind, and the upstream session
 * whole, so a re-check starts from it without a second read.
 */
export type AccessTokenWithGrant = AccessToken & {
  readonly grant: Grant & {
    readonly upstreamSession: UpstreamSession | null;
    readonly client: Pick<Client, "registrationType" | "grantTypes">;
  };
};

/**
 * How a joined read's column list is selected: as is (one value per column, PostgreSQL), or wrapped
 * by the caller (SQLite selects it as one JSON array: sqlite-hot-sql.ts says why).
 */
export type SelectColumns = (columns: string) => string;
const asColumns: SelectColumns = (columns) => columns;

/** `"alias"."column"` for every column of a table, in its order (the shape `decodeRow` reads). */
export function columnList<Row>(t: Table<Row>, alias: string): string {
  return t.columns.map((c) => `"${alias}"."${c}"`).join(", ");
}

/**
 * The row of `t` at `offset` in an array row. `date` turns the driver's value into a Date (SQLite
 * gives text, PostgreSQL a Date already); null stays null.
 */
export function decodeRow<Row>(t: Table<Row>, values: readonly unknown[], offset: number, date: (value: unknown) => Date): Row {
  const { columns, dates } = t;
  const row: Record<string, unknown> = {};
  for (let i = 0; i < columns.length; i++) {
    const value = values[offset + i] ?? null;
    row[columns[i]!] = value !== null && dates[i] ? date(value) : value;
  }
  return row as Row;
}

/**
 * The columns refreshTokenByHash selects, on either database: what a refresh needs of the token,
 * its client whole (a refresh authenticates the client from this row instead of reading it again),
 * what it needs of the grant and of the grant's upstream session.
 */
export const refreshTokenWithGrantColumns = (select: SelectColumns = asColumns): string =>
  `${select(`${columnList(refreshTokenClaim, "r")}, ${columnList(tables.client, "c")}, ${columnList(grantOfToken, "g")}, ${columnList(upstreamSessionState, "u")}`)}
    FROM "RefreshToken" AS "r" JOIN "Client" AS "c" ON "c"."id" = "r"."clientId" JOIN "Grant" AS "g" ON "g"."id" = "r"."grantId"
    LEFT JOIN "UpstreamSession" AS "u" ON "u"."id" = "g"."upstreamSessionId"`;

/** Decodes a row of refreshTokenWithGrantColumns. */
export function decodeRefreshTokenWithGrant(values: readonly unknown[], date: (value: unknown) => Date): RefreshTokenWithGrant {
  const { client } = tables;
  const c = refreshTokenClaim.columns.length;
  const g = c + client.columns.length;
  const u = g + grantOfToken.columns.length;
  // Object.assign adds to the decoded row; a spread would copy every column into a new object.
  return Object.assign(decodeRow(refreshTokenClaim, values, 0, date), {
    client: decodeRow(client, values, c, date),
    grant: Object.assign(decodeRow(grantOfToken, values, g, date), {
      upstreamSession: values[u] == null ? null : decodeRow(upstreamSessionState, values, u, date),
    }),
  });
}

/**
 * The columns codeByHash selects, on either database: what an exchange needs of the code and of
 * its grant, and its client whole (a code exchange authenticates the client from this row instead
 * of reading it first).
 */
export const codeWithGrantColumns = (select: SelectColumns = asColumns): string =>
  `${select(`${columnList(codeClaim, "a")}, ${columnList(grantOfToken, "g")}, ${columnList(tables.client, "c")}`)}
    FROM "AuthorizationCode" AS "a" JOIN "Grant" AS "g" ON "g"."id" = "a"."grantId" JOIN "Client" AS "c" ON "c"."id" = "a"."clientId"`;

/** Decodes a row of codeWithGrantColumns. */
export function decodeCodeWithGrant(values: readonly unknown[], date: (value: unknown) => Date): CodeWithGrant {
  const g = codeClaim.columns.length;
  const c = g + grantOfToken.columns.length;
  return Object.assign(decodeRow(codeClaim, values, 0, date), {
    grant: decodeRow(grantOfToken, values, g, date),
    client: decodeRow(tables.client, values, c, date),
  });
}

/** The columns accessTokenByHash selects, on either database: the token, its grant, the grant's upstream session, the client's kind. */
export const accessTokenWithGrantColumns = (select: SelectColumns = asColumns): string =>
  `${select(`${columnList(tables.accessToken, "a")}, ${columnList(tables.grant, "g")}, ${columnList(tables.upstreamSession, "u")}, "c"."registrationType", "c"."grantTypes"`)}
    FROM "AccessToken" AS "a" JOIN "Grant" AS "g" ON "g"."id" = "a"."grantId" JOIN "Client" AS "c" ON "c"."id" = "g"."clientId"
    LEFT JOIN "UpstreamSession" AS "u" ON "u"."id" = "g"."upstreamSessionId"`;

/** Decodes a row of accessTokenWithGrantColumns. */
export function decodeAccessTokenWithGrant(values: readonly unknown[], date: (value: unknown) => Date): AccessTokenWithGrant {
  const { accessToken, grant, upstreamSession } = tables;
  const g = accessToken.columns.length;
  const u = g + grant.columns.length;
  const [registrationType, grantTypes] = values.slice(u + upstreamSession.columns.length) as [string, string];
  return Object.assign(decodeRow(accessToken, values, 0, date), {
    grant: Object.assign(decodeRow(grant, values, g, date), {
      upstreamSession: values[u] == null ? null : decodeRow(upstreamSession, values, u, date),
      client: { registrationType, grantTypes },
    }),
  });
}

/** A row's values in column order, for an INSERT; `date` encodes as the database's Prisma adapter does. */
export function rowValues<Row>(t: Table<Row>, row: Row, date: (value: Date) => unknown): unknown[] {
  return t.columns.map((c) => {
    const value = row[c] ?? null;
    return value instanceof Date ? date(value) : value;
  });
}
