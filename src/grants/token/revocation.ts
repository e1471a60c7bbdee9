// Token revocation (RFC 7009). A refresh token takes its whole grant with it (and the upstream
// token, when no live grant needs it any more); an access token goes alone. Unknown tokens and
// other clients' tokens are silently ignored, so nothing is learned from the answer.
import { z } from "zod";
import { audit } from "../audit.ts";
import { dateOf } from "../../lib/clock.ts";
import { hashPresentedToken } from "../token-format.ts";
import type { RegisteredClient } from "../types.ts";
import type { TokenContext } from "./context.ts";
import { parseParameters, required, type FormParameters } from "./parameters.ts";

const Parameters = z.object({
  token: required("token"),
  token_type_hint: z.string().optional(),
});

export type RevocationHandler = (client: RegisteredClient, params: FormParameters) => Promise<void>;

export function revocation(t: TokenContext): RevocationHandler {
  return async (client, params) => {
    const p = parseParameters(Parameters, params);
    const hash = hashPresentedToken(p.token);
    const lookups = p.token_type_hint === "access_token" ? (["access", "refresh"] as const) : (["refresh", "access"] as const);
    for (const kind of lookups) {
      if (kind === "refresh") {
        const row = await t.db.refreshToken.findUnique({ where: { tokenHash: hash }, select: { grantId: true, clientId: true } });
        if (!row) continue;
        // RFC 7009 §2.1: a client may revoke only its own tokens; others are silently ignored.
        if (row.clientId !== client.id) return;
        await audit(t.db, { type: "token.revoked", clientId: row.clientId, grantId: row.grantId, detail: { tokenType: "refresh_token" } });
        await t.lifecycle.revokeGrant(row.grantId, "client_revoked");
        return;
      }
      const row = await t.db.accessToken.findUnique({ where: { tokenHash: hash }, select: { id: true, grantId: true, clientId: true } });
      if (!row) continue;
      if (row.clientId !== client.id) return;
      await t.db.accessToken.updateMany({ where: { id: row.id, revokedAt: null }, data: { revokedAt: dateOf(t.clock) } });
      await audit(t.db, { type: "token.revoked", clientId: row.clientId, grantId: row.grantId, detail: { tokenType: "access_token" } });
      t.bus.publish({ tokenHashes: [hash] });
      return;
    }
  };
}
