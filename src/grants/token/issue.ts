// The token rows every grant creates: an access token (and, unless told otherwise, a refresh
// token) for a grant, inside the caller's transaction. Neither outlives the grant.
import { timeOrderedRowId } from "../../store/row-id.ts";
import type { Tx } from "../../store/db.ts";
import type { GrantUse, IssuedRows } from "../../store/hot-store.ts";
import type { GrantsContext } from "../context.ts";
import { initialDeadlines } from "../lifecycle.ts";
import { mintSecret, type MintedSecret } from "../token-format.ts";
import type { TokenResponse } from "../types.ts";

/** What issuing needs of a grant. */
export interface GrantRow {
  readonly id: string;
  readonly clientId: string;
  readonly absoluteExpiresAt: Date;
}

export interface IssueOptions {
  /** The access token to store (derived on refresh); a fresh one by default. */
  readonly access?: MintedSecret;
  /** The refresh token to store (derived on refresh); a fresh one by default; null for none. */
  readonly refresh?: MintedSecret | null;
  readonly parentRefreshId?: string;
}

/** Seconds from now until `expiresAt`, at least 1 (RFC 6749 §5.1 expires_in). */
export function expiresIn(expiresAt: Date, now: Date): number {
  return Math.max(1, Math.round((expiresAt.getTime() - now.getTime()) / 1000));
}

/**
 * The rows of one issuance and the response that hands them out. Nothing is written: the caller
 * stores the rows (the hot store, or Prisma inside its transaction) before answering. createdAt is
 * the system time, as Prisma's default would set it.
 */
export function issuedTokens(
  ctx: GrantsContext,
  grant: GrantRow,
  scope: string,
  resource: string,
  now: Date,
  options: IssueOptions = {},
): { rows: IssuedRows; response: TokenResponse } {
  const { config } = ctx;
  const access = options.access ?? mintSecret("accessToken");
  const cap = grant.absoluteExpiresAt.getTime();
  const accessExpiresAt = new Date(Math.min(now.getTime() + config.accessTokenTtlSeconds * 1000, cap));
  const minted = options.refresh === null ? null : (options.refresh ?? mintSecret("refreshToken"));
  const createdAt = new Date();
  const refresh = minted && {
    id: timeOrderedRowId(),
    tokenHash: minted.hash,
    prefix: minted.prefix,
    grantId: grant.id,
    clientId: grant.clientId,
    resource,
    scope,
    parentId: options.parentRefreshId ?? null,
    successorId: null,
    createdAt,
    expiresAt: new Date(Math.min(now.getTime() + config.refreshTokenTtlSeconds * 1000, cap)),
    consumedAt: null,
    graceUntil: null,
    firstUsedAt: null,
    revokedAt: null,
  };
  const rows: IssuedRows = {
    refresh,
    access: {
      id: timeOrderedRowId(),
      tokenHash: access.hash,
      prefix: access.prefix,
      grantId: grant.id,
      clientId: grant.clientId,
      resource,
      scope,
      refreshTokenId: refresh?.id ?? null,
      createdAt,
      expiresAt: accessExpiresAt,
      revokedAt: null,
    },
  };
  const response: TokenResponse = {
    access_token: access.value,
    token_type: "Bearer",
    expires_in: expiresIn(accessExpiresAt, now),
    ...(minted ? { refresh_token: minted.value } : {}),
    scope,
  };
  return { rows, response };
}

/** Issues and stores tokens inside the caller's Prisma transaction (the cold grants). */
export async function issueTokens(
  ctx: GrantsContext,
  tx: Tx,
  grant: GrantRow,
  scope: string,
  resource: string,
  now: Date,
  options: IssueOptions = {},
): Promise<{ response: TokenResponse; refreshId: string | null }> {
  const { rows, response } = issuedTokens(ctx, grant, scope, resource, now, options);
  if (rows.refresh) await tx.refreshToken.create({ data: rows.refresh });
  await tx.accessToken.create({ data: rows.access });
  return { response, refreshId: rows.refresh?.id ?? null };
}

/** The grant's use now: its idle deadline moves (never its maximum age). */
export function grantUse(ctx: GrantsContext, grantId: string, now: Date): GrantUse {
  const { lastUsedAt, idleExpiresAt } = initialDeadlines(ctx.config, now);
  return { grantId, lastUsedAt, idleExpiresAt };
}
