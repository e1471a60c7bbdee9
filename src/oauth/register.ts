// POST /register: RFC 7591 dynamic client registration (JSON in and out, 201 on success).
import type Koa from "koa";
import { OAuthError } from "../http/errors.ts";
import { readJsonObject, REGISTRATION_LIMIT } from "../http/body.ts";
import { parseClientMetadata, type RegistrationPolicy } from "../grants/client-metadata.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import { SUPPORTED_SCOPES, type RegisteredClient } from "../grants/types.ts";

export function clientMetadataResponse(client: RegisteredClient, clientSecret?: string): Record<string, unknown> {
  return {
    client_id: client.id,
    ...(clientSecret ? { client_secret: clientSecret, client_secret_expires_at: 0 } : {}),
    client_id_issued_at: Math.floor(client.createdAt.getTime() / 1000),
    redirect_uris: client.redirectUris,
    token_endpoint_auth_method: client.tokenEndpointAuthMethod,
    grant_types: client.grantTypes,
    response_types: client.responseTypes,
    ...(client.scope ? { scope: client.scope } : {}),
    ...(client.clientName ? { client_name: client.clientName } : {}),
    ...(client.clientUri ? { client_uri: client.clientUri } : {}),
    ...(client.logoUri ? { logo_uri: client.logoUri } : {}),
    ...(client.softwareId ? { software_id: client.softwareId } : {}),
    ...(client.softwareVersion ? { software_version: client.softwareVersion } : {}),
    ...(client.jwksUri ? { jwks_uri: client.jwksUri } : {}),
    ...(client.jwks ? { jwks: client.jwks } : {}),
    ...(client.signingAlg ? { token_endpoint_auth_signing_alg: client.signingAlg } : {}),
    ...(client.applicationType ? { application_type: client.applicationType } : {}),
  };
}

/**
 * `policy` says which app-scheme redirects and scopes a registration may have. RFC 7591 §3.2.1
 * lets the server replace requested values; the response always shows what was registered: the
 * grant types (authorization_code + refresh_token when none were asked) and, when the client asked
 * for scopes, the ones it got (the supported set when none of the asked ones exist here).
 */
export function registerHandler(clients: ClientRegistry, enabled: boolean, policy: RegistrationPolicy = {}): Koa.Middleware {
  return async (ctx) => {
    if (!enabled) {
      throw new OAuthError(
        "access_denied",
        "Dynamic client registration is disabled on this server; ask its operator for a client id (npx mcp-auth-broker clients add).",
        { status: 403 },
      );
    }
    const input = await readJsonObject(ctx, REGISTRATION_LIMIT, "invalid_client_metadata");
    const metadata = parseClientMetadata(input, "dynamic", policy);
    const { client, clientSecret } = await clients.register(metadata, "dynamic", ctx.ip);
    ctx.status = 201;
    ctx.set("Cache-Control", "no-store");
    const body = clientMetadataResponse(client, clientSecret);
    // Asked for scopes none of which exist here: no restriction was stored, so say what it may use.
    if (input.scope !== undefined && !client.scope) body.scope = (policy.scopesSupported ?? SUPPORTED_SCOPES).join(" ");
    ctx.body = body;
  };
}
