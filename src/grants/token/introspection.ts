// Token introspection (RFC 7662) of the broker's own tokens, for the client they were issued to.
// A token is active only while it, its grant and the upstream login behind it are all alive; an
// upstream that cannot say right now is an error (UpstreamUnavailable), not "inactive".
import { z } from "zod";
import { dateOf } from "../../lib/clock.ts";
import { CredentialRejected } from "../errors.ts";
import { grantDeathReason } from "../lifecycle.ts";
import { hashPresentedToken } from "../token-format.ts";
import type { IntrospectionResponse, RegisteredClient } from "../types.ts";
import { upstreamRejection, type TokenContext } from "./context.ts";
import { parseParameters, required, type FormParameters } from "./parameters.ts";

const Parameters = z.object({
  token: required("token"),
});

const INACTIVE: IntrospectionResponse = { active: false };

export type IntrospectionHandler = (client: RegisteredClient, params: FormParameters) => Promise<IntrospectionResponse>;

export function introspection(t: TokenContext): IntrospectionHandler {
  async function accessToken(token: string): Promise<IntrospectionResponse> {
    try {
      const v = await t.validator.validate(token, { requireResource: false });
      return {
        active: true,
        scope: v.scopes.join(" "),
        client_id: v.clientId,
        ...(v.subject ? { sub: v.subject } : {}),
        ...(v.user ? { username: v.user } : {}),
        aud: v.resource,
        iss: t.config.publicUrl,
        exp: Math.floor(v.expiresAt.getTime() / 1000),
        iat: Math.floor(v.issuedAt.getTime() / 1000),
        token_type: "Bearer",
      };
    } catch (err) {
      if (err instanceof CredentialRejected) return INACTIVE;
      throw err;
    }
  }

  return async (client, params) => {
    const p = parseParameters(Parameters, params);
    const hash = hashPresentedToken(p.token);
    const access = await t.db.accessToken.findUnique({ where: { tokenHash: hash }, select: { clientId: true } });
    if (access) return access.clientId === client.id ? accessToken(p.token) : INACTIVE;

    // With its grant (no relation: the hot store's read joins it); a token whose grant is gone reads as none.
    const refresh = await t.hot.refreshTokenByHash(hash);
    const now = dateOf(t.clock);
    if (!refresh || refresh.clientId !== client.id || refresh.revokedAt || refresh.expiresAt <= now || grantDeathReason(refresh.grant, now)) return INACTIVE;
    // The read by hash brings what a refresh needs; the grace window and issue time are in the whole row.
    const whole = await t.hot.refreshTokenById(refresh.id);
    if (!whole) return INACTIVE;
    if (whole.consumedAt && !(whole.graceUntil && now < whole.graceUntil)) return INACTIVE;
    if (await upstreamRejection(t, refresh.grant)) return INACTIVE;
    return {
      active: true,
      scope: refresh.scope,
      client_id: refresh.clientId,
      ...(refresh.grant.subject ? { sub: refresh.grant.subject } : {}),
      aud: refresh.resource,
      iss: t.config.publicUrl,
      exp: Math.floor(refresh.expiresAt.getTime() / 1000),
      iat: Math.floor(whole.createdAt.getTime() / 1000),
      token_type: "refresh_token",
    };
  };
}
