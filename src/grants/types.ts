// Domain types shared by the authorization server (oauth/), the gateway and the grants services.
// No Koa, no Prisma types here.

export type TokenEndpointAuthMethod = "none" | "client_secret_basic" | "client_secret_post";
export type GrantType = "authorization_code" | "refresh_token" | "client_credentials";

/** A client as the rest of the code sees it (JSON columns decoded, no secret hash). */
export interface RegisteredClient {
  readonly id: string;
  readonly redirectUris: readonly string[];
  readonly tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  readonly grantTypes: readonly GrantType[];
  readonly responseTypes: readonly string[];
  readonly scope: string | null;
  readonly clientName: string | null;
  readonly clientUri: string | null;
  readonly logoUri: string | null;
  readonly softwareId: string | null;
  readonly softwareVersion: string | null;
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
