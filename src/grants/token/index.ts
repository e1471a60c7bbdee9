// The token endpoint's domain side, in the manner of node-oidc-provider's lib/actions/grants: one
// handler per grant type, each declaring and parsing its own parameters, picked here by
// grant_type; plus revocation and introspection. oauth/ authenticates the client and hands over
// the form.
import { z } from "zod";
import { UnauthorizedClient, UnsupportedGrantType } from "../errors.ts";
import type { TokenIssuer } from "../ports.ts";
import type { GrantType } from "../types.ts";
import { authorizationCodeGrant } from "./authorization-code.ts";
import { clientCredentialsGrant } from "./client-credentials.ts";
import type { GrantHandler, TokenContext } from "./context.ts";
import { introspection } from "./introspection.ts";
import { parseParameters, required, rule } from "./parameters.ts";
import { refreshTokenGrant } from "./refresh-token.ts";
import { revocation } from "./revocation.ts";

export type { TokenContext } from "./context.ts";

const GRANT_TYPES: readonly GrantType[] = ["authorization_code", "refresh_token", "client_credentials"];

function grantTypeOf(value: string): GrantType {
  if (!(GRANT_TYPES as readonly string[]).includes(value)) throw new UnsupportedGrantType(`grant_type ${value.slice(0, 60)} is not supported.`);
  return value as GrantType;
}

const Parameters = z.object({
  grant_type: required("grant_type").transform(rule(grantTypeOf)),
});

export function createTokenIssuer(t: TokenContext): TokenIssuer {
  const grants: Record<GrantType, GrantHandler> = {
    authorization_code: authorizationCodeGrant(t),
    refresh_token: refreshTokenGrant(t),
    client_credentials: clientCredentialsGrant(t),
  };
  return {
    async grant(client, params) {
      const { grant_type } = parseParameters(Parameters, params);
      if (!client.grantTypes.includes(grant_type)) throw new UnauthorizedClient(`This client is not registered for the ${grant_type} grant.`);
      return grants[grant_type](client, params);
    },
    revoke: revocation(t),
    introspect: introspection(t),
  };
}
