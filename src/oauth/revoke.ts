// POST /revoke (RFC 7009): authenticated like /token; unknown tokens and other clients' tokens
// are answered 200 like any other, so nothing is learned from it.
import type Koa from "koa";
import { readForm } from "../http/body.ts";
import { authenticateClient, challengingClients } from "../http/client-auth.ts";
import type { ClientAuthentication } from "../grants/client-authentication.ts";
import type { TokenIssuer } from "../grants/ports.ts";

export function revokeHandler(auth: ClientAuthentication, tokens: TokenIssuer): Koa.Middleware {
  return async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    const params = await readForm(ctx);
    const client = await challengingClients(() => authenticateClient(ctx, params, auth, "revocation"));
    await tokens.revoke(client, params);
    ctx.status = 200;
    ctx.body = "";
  };
}
