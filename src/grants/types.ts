// Domain types shared by the authorization server (oauth/), the gateway and the grants services.
// No Koa, no Prisma types here.
import type { JWK } from "jose";

/**
 * The longest URL taken from a client (a client_id that is a metadata document's address, a
 * redirect URI, a logo or home page): browsers and proxies cut longer ones, and a longer one is an
 * attack on the storage or the logs, not a client.
 */
export const MAX_URL_LENGTH = 2000;

/**
 * The client authentication methods, in the order the metadata lists them: "none" first, since
 * claude.ai uses a metadata document only when it is listed.
 */
export const TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"] as const;
export type TokenEndpointAuthMethod = (typeof TOKEN_ENDPOINT_AUTH_METHODS)[number];

/** RFC 7517 §5: the public keys a private_key_jwt client signs its assertions with. */
export interface JsonWebKeySet {
  readonly keys: readonly JWK[];
}

/** What a registration says the client is (OpenID Connect Registration application_type). */
export type ApplicationType = "native" | "web";
/**
 * The grant types this server serves: the one list registration, metadata and the token endpoint
 * read. grants/token/index.ts holds a handler for each (its Record<GrantType, …> fails to compile
 * when one is missing).
 */
export const GRANT_TYPES = ["authorization_code", "refresh_token", "client_credentials", "urn:ietf:params:oauth:grant-type:token-exchange"] as const;
/** RFC 8693: an MCP server exchanges the identity assertion it received for the user's connected-account token. */
export const TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange";
export const ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token";
export type GrantType = (typeof GRANT_TYPES)[number];

export function isGrantType(value: unknown): value is GrantType {
  return typeof value === "string" && (GRANT_TYPES as readonly string[]).includes(value);
}

/** A client as the rest of the code sees it (JSON columns decoded, no secret hash). */
export interface RegisteredClient {
  readonly id: string;
  readonly redirectUris: readonly string[];
  readonly tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  /**
   * A second method it may use instead: "none" for a metadata document that registers
   * private_key_jwt and lists "none" among its token_endpoint_auth_methods_supported (ChatGPT's).
   */
  readonly fallbackAuthMethod: "none" | null;
  /** private_key_jwt: where the client publishes its public keys, or the key set itself. */
  readonly jwksUri: string | null;
  readonly jwks: JsonWebKeySet | null;
  /** The one JWS algorithm its assertions must use, when its registration names one. */
  readonly signingAlg: string | null;
  readonly grantTypes: readonly GrantType[];
  readonly responseTypes: readonly string[];
  readonly scope: string | null;
  readonly clientName: string | null;
  readonly clientUri: string | null;
  readonly logoUri: string | null;
  readonly softwareId: string | null;
  readonly softwareVersion: string | null;
  /** What the registration said the client is; recorded and shown, never a reason to refuse it. */
  readonly applicationType: ApplicationType | null;
  /** cimd: registered by the metadata document its id (an https URL) names. */
  readonly registrationType: "dynamic" | "manual" | "cimd";
  readonly createdAt: Date;
  readonly lastUsedAt: Date | null;
  /** cimd clients: the host that publishes the document, and whether CIMD_TRUSTED_HOSTS names it. */
  readonly metadataDocument?: { readonly host: string; readonly verified: boolean };
}

/** An /authorize request after every check passed: safe to store and act on. */
export interface ValidatedAuthorizationRequest {
  readonly clientId: string;
  readonly redirectUri: string;
  readonly codeChallenge: string;
  readonly codeChallengeMethod: "S256";
  /** Canonical resource URI (the default resource when the client sent none). */
  readonly resource: string;
  /** Space-separated, normalized (sorted, deduplicated). */
  readonly scope: string;
  readonly state: string | null;
  readonly protocolVersion: string | null;
}

/** A request's form as the HTTP layer read it: each parameter at most once (duplicates are refused there). */
export type FormParameters = Readonly<Record<string, string>>;

/** The OAuth token endpoint's success response (RFC 6749 §5.1). */
export interface TokenResponse {
  readonly access_token: string;
  readonly token_type: "Bearer";
  readonly expires_in: number;
  readonly refresh_token?: string;
  readonly scope: string;
}

/** The answer of a token exchange (RFC 8693 §2.2.1): the service's token, not one of the broker's. */
export interface ExchangedTokenResponse {
  readonly access_token: string;
  readonly issued_token_type: typeof ACCESS_TOKEN_TYPE;
  readonly token_type: "Bearer";
  readonly expires_in?: number;
}

/** RFC 7662 introspection response. */
export type IntrospectionResponse =
  | { readonly active: false }
  | {
      readonly active: true;
      readonly scope: string;
      readonly client_id: string;
      readonly sub?: string;
      readonly username?: string;
      readonly aud: string;
      readonly iss: string;
      readonly exp: number;
      readonly iat: number;
      readonly token_type: "Bearer" | "refresh_token";
    };

/**
 * The built-in scopes. `mcp` is the default scope for access to the MCP endpoint; the operator adds
 * more with SCOPES_SUPPORTED (config.clients.scopes; grants/scope.ts knownScopes() is the full set).
 */
export const SUPPORTED_SCOPES = ["mcp", "offline_access"] as const;
export const DEFAULT_SCOPE = "mcp";
/** Refresh tokens: always understood, whatever SCOPES_SUPPORTED says. */
export const OFFLINE_ACCESS = "offline_access";

/**
 * The subject of a machine client (client_credentials): what the MCP server receives as
 * X-Auth-Subject, and what an access rule names to admit it.
 */
export function machineSubject(clientId: string): string {
  return `client:${clientId}`;
}

/** Whether a subject is a machine client's: users' subjects start with their provider (`github:`, `oidc:`…). */
export function isMachineSubject(subject: string): boolean {
  return subject.startsWith("client:");
}
