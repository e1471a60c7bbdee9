// POST /token: form-encoded, client authenticated by its registered method, then the grant named by
// grant_type (grants/token/), which parses its own parameters. Responses are never cached.
import type Koa from "koa";
import { readForm } from "../http/body.ts";
import { challengingClients, presentedClient } from "../http/client-auth.ts";
import type { ClientAuthentication } from "../grants/client-authentication.ts";
import type { TokenIssuer } from "../grants/ports.ts";
import { isGrantType } from "../grants/types.ts";

export interface TokenDeps {
  readonly clientAuthentication: ClientAuthentication;
  readonly tokens: TokenIssuer;
}

export function tokenHandler(deps: TokenDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.set("Pragma", "no-cache");
    const params = await readForm(ctx);
    // Only the grants this server knows become a metrics label (a bounded set).
    if (isGrantType(params.grant_type)) ctx.state.grantType = params.grant_type;
    // The client is authenticated by the grants code, against its row: a refresh reads that row
    // with the token (grants/token/index.ts).
    ctx.body = await challengingClients(() => deps.tokens.grant(presentedClient(ctx, params, deps.clientAuthentication), params));
  };
}
