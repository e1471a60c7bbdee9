// POST /token: form-encoded, client authenticated by its registered method, then the grant named by
// grant_type (grants/token/), which parses its own parameters. Responses are never cached.
import type Koa from "koa";
import { readForm } from "../http/body.ts";
import { authenticateClient } from "../http/client-auth.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { TokenIssuer } from "../grants/ports.ts";

export interface TokenDeps {
  readonly clients: ClientRegistry;
  readonly tokens: TokenIssuer;
}

export function tokenHandler(deps: TokenDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.set("Pragma", "no-cache");
    const params = await readForm(ctx);
    const client = await authenticateClient(ctx, params, deps.clients);
    ctx.body = await deps.tokens.grant(client, params);
  };
}
