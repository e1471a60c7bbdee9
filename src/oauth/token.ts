// POST /token: form-encoded, client authenticated by its registered method, then one handler per
// grant type. Responses are never cached.
import type Koa from "koa";
import { OAuthError } from "../http/errors.ts";
import { readForm } from "../http/body.ts";
import { authenticateClient } from "../http/client-auth.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { TokenIssuer } from "../grants/ports.ts";
import type { GrantType } from "../grants/types.ts";
import { resolveResource } from "../grants/resource.ts";
import { parseScope, resolveScope } from "../grants/scope.ts";

export interface TokenDeps {
  readonly resource: string;
  readonly clients: ClientRegistry;
  readonly tokens: TokenIssuer;
}

const GRANT_TYPES: readonly GrantType[] = ["authorization_code", "refresh_token", "client_credentials"];

export function tokenHandler(deps: TokenDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.set("Pragma", "no-cache");
    const params = await readForm(ctx);
    const client = await authenticateClient(ctx, params, deps.clients);
    const grantType = params.grant_type;
    if (!grantType) throw new OAuthError("invalid_request", "grant_type is required.");
    if (!(GRANT_TYPES as readonly string[]).includes(grantType)) throw new OAuthError("unsupported_grant_type", `grant_type ${grantType.slice(0, 60)} is not supported.`);
    if (!client.grantTypes.includes(grantType as GrantType)) throw new OAuthError("unauthorized_client", `This client is not registered for the ${grantType} grant.`);
    const resource = params.resource === undefined ? undefined : resolveResource(params.resource, deps.resource);
    switch (grantType as GrantType) {
      case "authorization_code":
        if (!params.code) throw new OAuthError("invalid_request", "code is required.");
        ctx.body = await deps.tokens.exchangeAuthorizationCode({ code: params.code, client, redirectUri: params.redirect_uri, codeVerifier: params.code_verifier, resource });
        return;
      case "refresh_token":
        if (!params.refresh_token) throw new OAuthError("invalid_request", "refresh_token is required.");
        // Refresh may only narrow what was granted: the requested set is passed as asked.
        ctx.body = await deps.tokens.refresh({ refreshToken: params.refresh_token, client, scope: parseScope(params.scope, client.scope)?.join(" "), resource });
        return;
      case "client_credentials":
        ctx.body = await deps.tokens.clientCredentials({ client, scope: resolveScope(params.scope, client.scope), resource });
        return;
    }
  };
}
