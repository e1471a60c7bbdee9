// The broker's public signing keys (RFC 7517 JWK Set): MCP servers verify X-Auth-Assertion with
// them. Cached by verifiers for minutes; a new key is published an hour before it signs.
import type Koa from "koa";
import type { SigningKeys } from "../grants/signing-keys.ts";

export function jwksHandler(keys: SigningKeys): Koa.Middleware {
  return async (ctx) => {
    ctx.set("Cache-Control", "public, max-age=300");
    ctx.type = "application/jwk-set+json";
    ctx.body = JSON.stringify({ keys: await keys.published() });
  };
}
