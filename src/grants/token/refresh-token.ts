// grant_type=refresh_token (OAuth 2.1 §4.3): rotation. Each refresh token is used once; its
// successor pair is derived from it, so a retry within the grace window (a lost response) gets
// the same pair back, while any other reuse is theft and revokes the whole grant. Refresh may
// narrow the scope, never widen it, and honours the upstream login behind the grant.
import { z } from "zod";
import { audit } from "../audit.ts";
import { dateOf } from "../clock.ts";
import { InvalidGrant, InvalidScope, InvalidTarget } from "../errors.ts";
import { grantDeathReason } from "../lifecycle.ts";
import { parseScope } from "../scope.ts";
import { deriveSecret, hashPresentedToken, type MintedSecret } from "../token-format.ts";
import type { TokenResponse } from "../types.ts";
import { LostClaim, upstreamRejection, type GrantHandler, type TokenContext } from "./context.ts";
import { expiresIn, issueTokens, touchGrant } from "./issue.ts";
import { optionalResource, parseParameters, required } from "./parameters.ts";

const INVALID_REFRESH = "The refresh token is invalid, expired or revoked.";

interface SuccessorPair {
  readonly access: MintedSecret;
  readonly successor: MintedSecret;
}

export function refreshTokenGrant(t: TokenContext): GrantHandler {
  const Parameters = z.object({
    resource: optionalResource(t.config.resourceUrl),
    refresh_token: required("refresh_token"),
    scope: z.string().optional(),
  });

  /**
   * A rotated refresh token presented again. Within the grace window, and while its successor has
   * not been used, it is a retry of a lost response: the same successor pair is returned (derived,
   * so nothing was stored in plaintext). Otherwise it is reuse, a sign of theft: the grant dies.
   */
  async function presentedAgain(rowId: string, grantId: string, clientId: string, pair: SuccessorPair, now: Date): Promise<TokenResponse> {
    const row = await t.db.refreshToken.findUniqueOrThrow({ where: { id: rowId } });
    const next = row.successorId ? await t.db.refreshToken.findUnique({ where: { id: row.successorId } }) : null;
    const inGrace = row.graceUntil !== null && now < row.graceUntil;
    if (inGrace && next && !next.firstUsedAt && !next.revokedAt && next.tokenHash === pair.successor.hash) {
      const access = await t.db.accessToken.findUnique({ where: { tokenHash: pair.access.hash } });
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
    await t.lifecycle.revokeGrant(grantId, "refresh_reuse");
    throw new InvalidGrant(INVALID_REFRESH);
  }

  return async (client, params) => {
    const p = parseParameters(Parameters, params);
    // Only narrowing (below): a scope the user consented to at step-up counts, registered or not.
    const requested = parseScope(p.scope, undefined, t.config.clients.scopes.supported);
    const row = await t.db.refreshToken.findUnique({ where: { tokenHash: hashPresentedToken(p.refresh_token) }, include: { grant: true } });
    if (!row || row.clientId !== client.id) throw new InvalidGrant(INVALID_REFRESH);
    const now = dateOf(t.clock);
    // The grant's death says more (idle, maximum age) than the token's own expiry.
    const death = grantDeathReason(row.grant, now);
    if (death) throw new InvalidGrant(death);
    if (row.revokedAt || row.expiresAt <= now) throw new InvalidGrant(INVALID_REFRESH);
    if (p.resource !== undefined && p.resource !== row.resource)
      throw new InvalidTarget("resource does not match the resource this refresh token was issued for.");
    let scope = row.scope;
    if (requested !== undefined) {
      const granted = new Set(row.scope.split(" ").filter(Boolean));
      if (requested.length === 0 || requested.some((s) => !granted.has(s)))
        throw new InvalidScope(`scope can only narrow on refresh; granted: "${row.scope}".`);
      scope = requested.join(" ");
    }
    const rejected = await upstreamRejection(t.sessions, row.grant);
    if (rejected) throw new InvalidGrant(rejected.reason);

    const pair: SuccessorPair = {
      access: deriveSecret("accessToken", t.rotationKey, p.refresh_token),
      successor: deriveSecret("refreshToken", t.rotationKey, p.refresh_token),
    };
    if (row.consumedAt) return presentedAgain(row.id, row.grantId, row.clientId, pair, now);
    try {
      const { response } = await t.db.$transaction(async (tx) => {
        const graceUntil = new Date(now.getTime() + t.config.refreshGraceSeconds * 1000);
        const claim = await tx.refreshToken.updateMany({ where: { id: row.id, consumedAt: null, revokedAt: null }, data: { consumedAt: now, graceUntil } });
        if (claim.count !== 1) throw new LostClaim();
        // This token is its parent's successor: its first use ends the parent's grace window.
        await tx.refreshToken.updateMany({ where: { id: row.id, firstUsedAt: null }, data: { firstUsedAt: now } });
        const issued = await issueTokens(t, tx, row.grant, scope, row.resource, now, { access: pair.access, refresh: pair.successor, parentRefreshId: row.id });
        await tx.refreshToken.update({ where: { id: row.id }, data: { successorId: issued.refreshId } });
        await touchGrant(t, tx, row.grantId, now);
        await audit(tx, { type: "token.refreshed", clientId: row.clientId, grantId: row.grantId, subject: row.grant.subject });
        return issued;
      });
      return response;
    } catch (err) {
      if (err instanceof LostClaim) return presentedAgain(row.id, row.grantId, row.clientId, pair, dateOf(t.clock));
      throw err;
    }
  };
}
