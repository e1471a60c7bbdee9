// grant_type=refresh_token (OAuth 2.1 §4.3): rotation. Each refresh token is used once; its
// successor pair is derived from it, so a retry within the grace window (a lost response) gets
// the same pair back, while any other reuse is theft and revokes the whole grant. Refresh may
// narrow the scope, never widen it, and honours the upstream login behind the grant.
import { z } from "zod";
import { audit, auditRow } from "../audit.ts";
import { dateOf } from "../../lib/clock.ts";
import { InvalidGrant, InvalidScope, InvalidTarget } from "../errors.ts";
import { grantDeathReason } from "../lifecycle.ts";
import { covers, parseScope, scopeList } from "../scope.ts";
import { deriveSuccessorPair, storedSuccessorPair, tokenStamp } from "../token-format.ts";
import type { RegisteredClient, TokenResponse } from "../types.ts";
import type { RefreshTokenWithGrant } from "../../store/hot-store.ts";
import { presentedKey, upstreamRejection, type GrantHandler, type TokenContext } from "./context.ts";
import { expiresIn, grantUse, issuedTokens } from "./issue.ts";
import { optionalResource, parseParameters, required } from "./parameters.ts";
import { protectedResources } from "../resource.ts";

const INVALID_REFRESH = "The refresh token is invalid, expired or revoked.";

/**
 * A rotated refresh token presented again. Within the grace window, and while its successor has
 * not been used, it is a retry of a lost response: the same successor pair is returned (derived,
 * so nothing was stored in plaintext). Otherwise it is reuse, a sign of theft: the grant dies.
 */
async function presentedAgain(t: TokenContext, token: RefreshTokenWithGrant, presented: string, now: Date): Promise<TokenResponse> {
  const { clientId, grantId } = token;
  const row = await t.hot.refreshTokenById(token.id);
  if (!row) throw new InvalidGrant(INVALID_REFRESH);
  const next = row.successorId ? await t.hot.refreshTokenById(row.successorId) : null;
  const inGrace = row.graceUntil !== null && now < row.graceUntil;
  const pair = inGrace && next && !next.firstUsedAt && !next.revokedAt ? storedSuccessorPair(t.rotationKey, presented, next.tokenHash) : undefined;
  if (next && pair) {
    const access = await t.hot.accessTokenByHash(pair.access.hash);
    if (access && !access.revokedAt) {
      return {
        access_token: pair.access.value,
        token_type: "Bearer",
        expires_in: expiresIn(access.expiresAt, now),
        refresh_token: pair.successor.value,
        scope: next.scope,
      };
    }
  }
  await audit(t.db, { type: "refresh.reused", clientId, grantId });
  t.logger.warn(
    { clientId, grantId },
    "security: a rotated refresh token was presented again after its grace; its grant is revoked (a stolen token, or a client that lost the answer)",
  );
  await t.lifecycle.revokeGrant(grantId, "refresh_reuse");
  throw new InvalidGrant(INVALID_REFRESH);
}

/** The presented token's row, when this client may refresh with it now for this resource. */
function checkedToken(row: RefreshTokenWithGrant | null, client: RegisteredClient, resource: string | undefined, now: Date): RefreshTokenWithGrant {
  if (!row || row.clientId !== client.id) throw new InvalidGrant(INVALID_REFRESH);
  // The grant's death says more (idle, maximum age) than the token's own expiry.
  const death = grantDeathReason(row.grant, now);
  if (death) throw new InvalidGrant(death);
  if (row.revokedAt || row.expiresAt <= now) throw new InvalidGrant(INVALID_REFRESH);
  if (resource !== undefined && resource !== row.resource) throw new InvalidTarget("resource does not match the resource this refresh token was issued for.");
  return row;
}

/** The scope of the new pair: the granted one, or a narrower one asked for. */
function narrowedScope(t: TokenContext, granted: string, requested: string[] | undefined): string {
  if (requested === undefined) return granted;
  // Narrower by the operator's hierarchy counts too (SCOPE_IMPLIES: docs:read from docs:write).
  if (requested.length === 0 || !covers(scopeList(granted), requested, t.config.clients.scopes.implies))
    throw new InvalidScope(`scope can only narrow on refresh; granted: "${granted}".`);
  return requested.join(" ");
}

export function refreshTokenGrant(t: TokenContext): GrantHandler {
  const Parameters = z.object({
    resource: optionalResource(protectedResources(t.config)),
    refresh_token: required("refresh_token"),
    scope: z.string().optional(),
  });

  return async (client, params, preread) => {
    const p = parseParameters(Parameters, params);
    // Only narrowing (below): a scope the user consented to at step-up counts, registered or not.
    const requested = parseScope(p.scope, undefined, t.config.clients.scopes.supported);
    const tokenHash = presentedKey(preread, "refresh_token", p.refresh_token);
    const presented = preread?.grantType === "refresh_token" && preread.hash === tokenHash ? preread.row : await t.hot.refreshTokenByHash(tokenHash);
    const now = dateOf(t.clock);
    const row = checkedToken(presented, client, p.resource, now);
    const scope = narrowedScope(t, row.scope, requested);
    const rejected = await upstreamRejection(t, row.grant);
    if (rejected) throw new InvalidGrant(rejected.reason);

    if (row.consumedAt) return presentedAgain(t, row, p.refresh_token, now);
    const pair = deriveSuccessorPair(t.rotationKey, p.refresh_token, tokenStamp());
    const { rows, response } = issuedTokens(t, row.grant, scope, row.resource, now, { access: pair.access, refresh: pair.successor, parentRefreshId: row.id });
    // One atomic step: the claim (only an unconsumed, unrevoked token), the token's first use (it is
    // its parent's successor: that ends the parent's grace window), its successor link, the new
    // pair, the grant's use and the audit event.
    const rotated = await t.hot.rotateRefreshToken({
      refreshTokenId: row.id,
      consumedAt: now,
      graceUntil: new Date(now.getTime() + t.config.refreshGraceSeconds * 1000),
      issued: { access: rows.access, refresh: rows.refresh! },
      use: grantUse(t, row.grantId, now),
      audit: auditRow({ type: "token.refreshed", clientId: row.clientId, grantId: row.grantId, subject: row.grant.subject }),
    });
    if (!rotated) return presentedAgain(t, row, p.refresh_token, dateOf(t.clock));
    return response;
  };
}
