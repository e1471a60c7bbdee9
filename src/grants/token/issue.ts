// The token rows every grant creates: an access token (and, unless told otherwise, a refresh
// token) for a grant, inside the caller's transaction. Neither outlives the grant.
import { randomUUID } from "node:crypto";
import type { Tx } from "../../store/db.ts";
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

export async function issueTokens(
  ctx: GrantsContext,
  tx: Tx,
  grant: GrantRow,
  scope: string,
  resource: string,
  now: Date,
  options: IssueOptions = {},
): Promise<{ response: TokenResponse; refreshId: string | null }> {
  const { config } = ctx;
  const access = options.access ?? mintSecret("accessToken");
  const cap = grant.absoluteExpiresAt.getTime();
  const accessExpiresAt = new Date(Math.min(now.getTime() + config.accessTokenTtlSeconds * 1000, cap));
  const refresh = options.refresh === null ? null : (options.refresh ?? mintSecret("refreshToken"));
  let refreshId: string | null = null;
  if (refresh) {
    refreshId = randomUUID();
    await tx.refreshToken.create({
      data: {
        id: refreshId,
        tokenHash: refresh.hash,
        prefix: refresh.prefix,
        grantId: grant.id,
        clientId: grant.clientId,
        resource,
        scope,
        parentId: options.parentRefreshId ?? null,
        expiresAt: new Date(Math.min(now.getTime() + config.refreshTokenTtlSeconds * 1000, cap)),
      },
    });
  }
  await tx.accessToken.create({
    data: {
      id: randomUUID(),
      tokenHash: access.hash,
      prefix: access.prefix,
      grantId: grant.id,
      clientId: grant.clientId,
      resource,
      scope,
      refreshTokenId: refreshId,
      expiresAt: accessExpiresAt,
    },
  });
  const response: TokenResponse = {
    access_token: access.value,
    token_type: "Bearer",
    expires_in: expiresIn(accessExpiresAt, now),
    ...(refresh ? { refresh_token: refresh.value } : {}),
    scope,
  };
  return { response, refreshId };
}

/** Records the grant's use: its idle deadline moves (never its maximum age). */
export async function touchGrant(ctx: GrantsContext, tx: Tx, grantId: string, now: Date): Promise<void> {
  const { lastUsedAt, idleExpiresAt } = initialDeadlines(ctx.config, now);
  await tx.grant.update({ where: { id: grantId }, data: { lastUsedAt, idleExpiresAt } });
}
