// POST /introspect (RFC 7662), for clients that authenticated (a secret or a client assertion).
import type Koa from "koa";
import { OAuthError } from "../http/errors.ts";
import { readForm } from "../http/body.ts";
import { authenticateClient, challengingClients } from "../http/client-auth.ts";
import type { ClientAuthentication } from "../grants/client-authentication.ts";
import type { TokenIssuer } from "../grants/ports.ts";

export function introspectHandler(auth: ClientAuthentication, tokens: TokenIssuer): Koa.Middleware {
  return async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    const params = await readForm(ctx);
    const client = await challengingClients(() => authenticateClient(ctx, params, auth, "introspection"));
    if (client.authenticatedBy === "none") {
      throw new OAuthError("invalid_client", "Introspection is for confidential clients (a client secret or a client assertion).", {
        status: 401,
        headers: { "WWW-Authenticate": 'Basic realm="mcp-auth-broker"' },
      });
    }
    ctx.body = await tokens.introspect(client, params);
  };
}
