// grant_type=authorization_code (OAuth 2.1 §4.1.3): the broker's code from the upstream login,
// with its PKCE verifier and the redirect URI of the authorization request. A code presented
// twice revokes the grant it created.
import { z } from "zod";
import { audit, auditRow } from "../audit.ts";
import { dateOf } from "../../lib/clock.ts";
import { InvalidGrant, InvalidTarget } from "../errors.ts";
import { grantDeathReason } from "../lifecycle.ts";
import { verifyPkceS256 } from "../pkce.ts";
import { presentedKey, type GrantHandler, type TokenContext } from "./context.ts";
import { grantUse, issuedTokens } from "./issue.ts";
import { optionalResource, parseParameters, required } from "./parameters.ts";
import { protectedResources } from "../resource.ts";

const INVALID_CODE = "The authorization code is invalid, expired or was already used.";

export function authorizationCodeGrant(t: TokenContext): GrantHandler {
  const Parameters = z.object({
    resource: optionalResource(protectedResources(t.config)),
    code: required("code"),
    code_verifier: required("code_verifier", "code_verifier is required: PKCE (S256) is mandatory."),
    redirect_uri: required("redirect_uri", "redirect_uri is required and must equal the one of the authorization request."),
  });

  /** A code presented twice: the grant it created is revoked (OAuth 2.1 §4.1.3). */
  async function replayed(grantId: string, clientId: string): Promise<never> {
    await audit(t.db, { type: "code.replayed", clientId, grantId });
    t.logger.warn({ clientId, grantId }, "security: an authorization code was presented twice; its grant is revoked (a stolen code, or a client that retried)");
    await t.lifecycle.revokeGrant(grantId, "code_replay");
    throw new InvalidGrant(INVALID_CODE);
  }

  return async (client, params, preread) => {
    const p = parseParameters(Parameters, params);
    const codeHash = presentedKey(preread, "authorization_code", p.code);
    const row = preread?.grantType === "authorization_code" && preread.hash === codeHash ? preread.row : await t.hot.codeByHash(codeHash);
    if (!row || row.clientId !== client.id) throw new InvalidGrant(INVALID_CODE);
    if (row.consumedAt) return replayed(row.grantId, row.clientId);
    const now = dateOf(t.clock);
    if (row.expiresAt <= now) throw new InvalidGrant(INVALID_CODE);
    if (p.redirect_uri !== row.redirectUri) throw new InvalidGrant("redirect_uri does not match the authorization request.");
    if (!verifyPkceS256(p.code_verifier, row.codeChallenge)) throw new InvalidGrant("PKCE verification failed: code_verifier does not match code_challenge.");
    if (p.resource !== undefined && p.resource !== row.resource) throw new InvalidTarget("resource does not match the resource of the authorization request.");
    const death = grantDeathReason(row.grant, now);
    if (death) throw new InvalidGrant(death);

    // A refresh token only for a client registered for the refresh_token grant: /token would
    // refuse it anyway, and a token nobody can use is one more secret to leak.
    const refresh = client.grantTypes.includes("refresh_token") ? {} : { refresh: null };
    const { rows, response } = issuedTokens(t, row.grant, row.scope, row.resource, now, refresh);
    // One atomic step: the claim (only an unconsumed code), the grant's use, the tokens, the audit event.
    const exchanged = await t.hot.exchangeCode({
      codeId: row.id,
      consumedAt: now,
      issued: rows,
      use: grantUse(t, row.grantId, now),
      audit: auditRow({
        type: "token.issued",
        clientId: row.clientId,
        grantId: row.grantId,
        subject: row.grant.subject,
        detail: { grantType: "authorization_code" },
      }),
    });
    if (!exchanged) return replayed(row.grantId, row.clientId);
    return response;
  };
}
