// POST /introspect (RFC 7662), for confidential clients only.
import type Koa from "koa";
import { OAuthError } from "../http/errors.ts";
import { readForm } from "../http/body.ts";
import { authenticateClient } from "../http/client-auth.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { TokenIssuer } from "../grants/ports.ts";

export function introspectHandler(clients: ClientRegistry, tokens: TokenIssuer): Koa.Middleware {
  return async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    const params = await readForm(ctx);
    const client = await authenticateClient(ctx, params, clients);
    if (client.tokenEndpointAuthMethod === "none") {
      throw new OAuthError("invalid_client", "Introspection is for confidential clients (with a client secret).", {
        status: 401,
        headers: { "WWW-Authenticate": 'Basic realm="mcp-auth-broker"' },
      });
    }
    ctx.body = await tokens.introspect(client, params);
  };
}
