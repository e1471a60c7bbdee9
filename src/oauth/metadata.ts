// Discovery documents: RFC 8414 authorization server metadata and RFC 9728 protected resource
// metadata. Both revisions' clients are answered alike; the protocol version they announce is logged.
import type Koa from "koa";
import type { Config } from "../config/load.ts";
import type { McpServerEntry } from "../config/catalogue.ts";
import { knownScopes, resourceScopes } from "../grants/scope.ts";
import { ASSERTION_ALGORITHMS } from "../grants/client-assertion.ts";
import { GRANT_TYPES, TOKEN_ENDPOINT_AUTH_METHODS } from "../grants/types.ts";

export function authorizationServerMetadata(config: Config, dynamicRegistration: boolean): Record<string, unknown> {
  const base = config.publicUrl;
  return {
    issuer: base,
    authorization_endpoint: `${base}/authorize`,
    token_endpoint: `${base}/token`,
    ...(dynamicRegistration ? { registration_endpoint: `${base}/register` } : {}),
    revocation_endpoint: `${base}/revoke`,
    introspection_endpoint: `${base}/introspect`,
    response_types_supported: ["code"],
    response_modes_supported: ["query"],
    grant_types_supported: GRANT_TYPES,
    code_challenge_methods_supported: ["S256"],
    token_endpoint_auth_methods_supported: TOKEN_ENDPOINT_AUTH_METHODS,
    token_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    revocation_endpoint_auth_methods_supported: TOKEN_ENDPOINT_AUTH_METHODS,
    revocation_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    // Introspection is for confidential clients only.
    introspection_endpoint_auth_methods_supported: TOKEN_ENDPOINT_AUTH_METHODS.filter((m) => m !== "none"),
    introspection_endpoint_auth_signing_alg_values_supported: ASSERTION_ALGORITHMS,
    // SCOPES_SUPPORTED, with mcp and offline_access, which are always understood.
    scopes_supported: knownScopes(config.clients.scopes.supported),
    authorization_response_iss_parameter_supported: true,
    // draft-ietf-oauth-client-id-metadata-document §6; MCP 2025-11-25 clients look for it.
    ...(config.clients.cimd.enabled ? { client_id_metadata_document_supported: true } : {}),
  };
}

/**
 * RFC 9728 metadata of one server of the catalogue. `resource` is the URI the client connected to:
 * the server's own, or PUBLIC_URL/mcp for the default server there (RFC 9728 §3.3: the client checks
 * it against the URL it used; the authorization server maps that name to the server).
 */
export function protectedResourceMetadata(config: Config, server: McpServerEntry, resource = server.resourceUrl): Record<string, unknown> {
  return {
    resource,
    authorization_servers: [config.publicUrl],
    bearer_methods_supported: ["header"],
    // What the resource itself asks for (its scopes and mcp); refresh tokens are the AS's business.
    scopes_supported: resourceScopes(server.scopes.supported),
    // RFC 9728 §2: human-readable, shown to the user (the server's title; RESOURCE_NAME alone).
    resource_name: server.title,
  };
}

/** A metadata document as JSON; `document` returning undefined: 404 (nothing described there). */
export function serveJson(document: (ctx: Koa.Context) => Record<string, unknown> | undefined): Koa.Middleware {
  return (ctx) => {
    const body = document(ctx);
    if (body === undefined) return;
    const version = ctx.get("mcp-protocol-version") || ctx.get("context-protocol-version");
    if (version) ctx.state.log.info({ protocolVersion: version.slice(0, 40), path: ctx.path }, "discovery");
    ctx.set("Cache-Control", "public, max-age=300");
    ctx.body = body;
  };
}
