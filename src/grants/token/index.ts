// The token endpoint's domain side, in the manner of node-oidc-provider's lib/actions/grants: one
// handler per grant type, each declaring and parsing its own parameters, picked here by
// grant_type; plus revocation and introspection. oauth/ reads the client's credentials and hands
// over the form; the client is authenticated here, against its row.
import { z } from "zod";
import { UnauthorizedClient, UnsupportedGrantType } from "../errors.ts";
import type { TokenIssuer } from "../ports.ts";
import { isGrantType, TOKEN_EXCHANGE, type GrantType } from "../types.ts";
import { tokenExchangeGrant } from "./token-exchange.ts";
import { authorizationCodeGrant } from "./authorization-code.ts";
import { clientCredentialsGrant } from "./client-credentials.ts";
import type { GrantHandler, Preread, TokenContext } from "./context.ts";
import { introspection } from "./introspection.ts";
import { parseParameters, required, rule, type FormParameters } from "./parameters.ts";
import { hashPresentedToken } from "../token-format.ts";
import { refreshTokenGrant } from "./refresh-token.ts";
import { revocation } from "./revocation.ts";
import { inSpan } from "../../telemetry/span.ts";

export type { TokenContext } from "./context.ts";

function grantTypeOf(value: string): GrantType {
  if (!isGrantType(value)) throw new UnsupportedGrantType(`grant_type ${value.slice(0, 60)} is not supported.`);
  return value;
}

const Parameters = z.object({
  grant_type: required("grant_type").transform(rule(grantTypeOf)),
});

export function createTokenIssuer(t: TokenContext): TokenIssuer {
  const grants: Record<GrantType, GrantHandler> = {
    authorization_code: authorizationCodeGrant(t),
    refresh_token: refreshTokenGrant(t),
    client_credentials: clientCredentialsGrant(t),
    [TOKEN_EXCHANGE]: tokenExchangeGrant(t),
  };
  /**
   * A refresh reads its token, and a code exchange its code, with the client in one statement, and
   * the client is authenticated from that row: one statement fewer per request than reading the
   * client first. The read has no effect, so the errors and their order stay those of
   * authenticating first.
   */
  async function preread(params: FormParameters): Promise<Preread | null> {
    if (params.grant_type === "refresh_token" && params.refresh_token) {
      const hash = hashPresentedToken(params.refresh_token);
      return { grantType: "refresh_token", presented: params.refresh_token, hash, row: await t.hot.refreshTokenByHash(hash) };
    }
    if (params.grant_type === "authorization_code" && params.code) {
      const hash = hashPresentedToken(params.code);
      return { grantType: "authorization_code", presented: params.code, hash, row: await t.hot.codeByHash(hash) };
    }
    return null;
  }

  return {
    // One span per grant, named by its type once parsed (a bounded set: unknown types stay "token grant").
    grant: (presented, params) =>
      inSpan("token grant", {}, async (span) => {
        const read = await preread(params);
        const readWith = read?.row?.clientId === presented.clientId ? read.row.client : undefined;
        const client = await presented.authenticate(readWith ? t.clients.known(readWith) : await t.clients.find(presented.clientId));
        span?.setAttribute("oauth.client.id", client.id);
        const { grant_type } = parseParameters(Parameters, params);
        span?.setAttribute("oauth.grant_type", grant_type).updateName(`grant ${grant_type}`);
        if (!client.grantTypes.includes(grant_type)) throw new UnauthorizedClient(`This client is not registered for the ${grant_type} grant.`);
        return grants[grant_type](client, params, read);
      }),
    revoke: revocation(t),
    introspect: introspection(t),
  };
}
