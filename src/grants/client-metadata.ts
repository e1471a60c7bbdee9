// RFC 7591 client metadata, validated once for both ways a client comes to exist: /register and
// the operator CLI's `clients add`. What differs between them is what a registration may ask for:
// a self-registered client never gets a grant without a user.
import type { ClientInteropConfig } from "../config/client-interop.ts";
import { z } from "zod";
import { InvalidClientMetadata, InvalidRedirectUri } from "./errors.ts";
import { redirectUriProblem } from "./redirect-uri.ts";
import { ASSERTION_ALGORITHMS } from "./client-assertion.ts";
import { parseKeySet } from "./client-keys.ts";
import {
  GRANT_TYPES,
  MAX_URL_LENGTH,
  isGrantType,
  TOKEN_EXCHANGE,
  SUPPORTED_SCOPES,
  TOKEN_ENDPOINT_AUTH_METHODS,
  type ApplicationType,
  type GrantType,
  type JsonWebKeySet,
  type RegisteredClient,
} from "./types.ts";
import { firstLine } from "../lib/error-text.ts";

/** What the server lets a registration ask for (config.clients); the defaults are the strictest. */
export interface RegistrationPolicy {
  /** ALLOW_APP_SCHEME_REDIRECTS: private-use schemes (cursor://…) for public clients. */
  readonly allowAppSchemeRedirects?: boolean;
  /** The scopes a client may register; others are dropped (RFC 7591 §3.2.1). */
  readonly scopesSupported?: readonly string[];
  /**
   * Grant types this server does not know are left out instead of refusing the registration: for
   * published metadata documents, which name every grant their client knows, for every server
   * (VS Code's lists the device code grant, claude.ai's the JWT bearer grant).
   */
  readonly ignoreUnknownGrantTypes?: boolean;
}

/**
 * What the configuration lets any registration (at /register or with the CLI) have: app-scheme
 * redirects as configured, the supported scopes (offline_access always).
 */
export function registrationPolicyOf(clients: ClientInteropConfig): RegistrationPolicy {
  return {
    allowAppSchemeRedirects: clients.allowAppSchemeRedirects,
    scopesSupported: [...new Set([...clients.scopes.supported, "offline_access"])],
  };
}

/** What a registration says about a client: a RegisteredClient before the registry gives it an id. */
export type ClientMetadata = Omit<RegisteredClient, "id" | "registrationType" | "createdAt" | "lastUsedAt">;

const httpsUrl = z
  .string()
  .max(MAX_URL_LENGTH)
  .refine((v) => {
    try {
      return new URL(v).protocol === "https:";
    } catch {
      return false;
    }
  }, "must be an https URL");

/**
 * A lone UTF-16 surrogate (JSON allows "\ud800"): not text, and no database or UTF-8 encoder takes
 * it as such.
 */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Text stored and shown as is: no control characters (a NUL cannot even be stored in PostgreSQL). */
const text = (max: number) =>
  z
    .string()
    .max(max)
    .regex(/^[^\u0000-\u001f\u007f]*$/, "must not contain control characters")
    .refine((v) => !LONE_SURROGATE.test(v), "must be valid Unicode text");

const Schema = z.object({
  redirect_uris: z.array(text(MAX_URL_LENGTH)).max(20).optional(),
  token_endpoint_auth_method: z.enum(TOKEN_ENDPOINT_AUTH_METHODS).optional(),
  grant_types: z.array(text(200)).max(10).optional(),
  response_types: z
    .array(z.enum(["code"]))
    .max(10)
    .optional(),
  scope: text(1000).optional(),
  client_name: text(200).trim().min(1).optional(),
  client_uri: httpsUrl.optional(),
  logo_uri: httpsUrl.optional(),
  software_id: text(200).optional(),
  software_version: text(100).optional(),
  // private_key_jwt (RFC 7591 §2 jwks_uri / jwks, OpenID Connect Registration token_endpoint_auth_signing_alg).
  jwks_uri: httpsUrl.optional(),
  jwks: z.unknown().optional(),
  token_endpoint_auth_signing_alg: text(20).optional(),
  // Any value: recorded when it is one of the two defined, never a reason to refuse a registration.
  application_type: z.unknown().optional(),
});

function fail(field: string, message: string, As: typeof InvalidClientMetadata | typeof InvalidRedirectUri = InvalidClientMetadata): never {
  throw new As(`${field} ${message}`);
}

/** A client's metadata as the Client table keeps it (lists as JSON text): registration and metadata documents write it alike. */
export function clientMetadataColumns(metadata: ClientMetadata) {
  return {
    redirectUris: JSON.stringify(metadata.redirectUris),
    tokenEndpointAuthMethod: metadata.tokenEndpointAuthMethod,
    grantTypes: JSON.stringify(metadata.grantTypes),
    responseTypes: JSON.stringify(metadata.responseTypes),
    scope: metadata.scope,
    clientName: metadata.clientName,
    clientUri: metadata.clientUri,
    logoUri: metadata.logoUri,
    softwareId: metadata.softwareId,
    softwareVersion: metadata.softwareVersion,
    fallbackAuthMethod: metadata.fallbackAuthMethod,
    jwksUri: metadata.jwksUri,
    jwks: metadata.jwks ? JSON.stringify(metadata.jwks) : null,
    signingAlg: metadata.signingAlg,
    applicationType: metadata.applicationType,
  };
}

/** application_type as recorded: "native" or "web" (OpenID Connect Registration), else nothing. */
function applicationTypeOf(value: unknown): ApplicationType | null {
  return value === "native" || value === "web" ? value : null;
}

/**
 * Who registers: the client itself at /register ("dynamic"), or the operator with the CLI
 * ("manual"). Only the operator can make a machine client (client_credentials): its tokens carry no
 * user, so a self-registered one would reach the MCP server with no login at all.
 */
export type RegistrationOrigin = "dynamic" | "manual";

type Parsed = z.output<typeof Schema>;

/** The grant and response types, consistent with each other and with who registers. */
function grantsOf(m: Parsed, tokenEndpointAuthMethod: string, origin: RegistrationOrigin, policy: RegistrationPolicy) {
  const known = (m.grant_types ?? []).filter(isGrantType);
  const unknown = (m.grant_types ?? []).filter((g) => !isGrantType(g));
  if (unknown.length && !policy.ignoreUnknownGrantTypes)
    fail("grant_types", `is invalid: ${JSON.stringify(unknown[0])} is not supported here (${GRANT_TYPES.join(", ")}).`);
  if (m.grant_types && m.grant_types.length > 0 && known.length === 0) fail("grant_types", `has none this server supports (${GRANT_TYPES.join(", ")}).`);
  // Without grant_types, what MCP clients expect (RFC 7591 §3.2.1 lets the server choose; the
  // response says so): the code grant and refresh tokens, not RFC 7591's bare authorization_code.
  const grantTypes: GrantType[] = [...new Set<GrantType>(m.grant_types ? known : ["authorization_code", "refresh_token"])];
  const responseTypes = [...new Set(m.response_types ?? (grantTypes.includes("authorization_code") ? ["code"] : []))];
  const usesCode = grantTypes.includes("authorization_code");
  if (usesCode !== responseTypes.includes("code")) fail("grant_types", 'and response_types are inconsistent: "authorization_code" goes with "code".');
  if (grantTypes.includes("refresh_token") && !usesCode) fail("grant_types", 'includes "refresh_token" without "authorization_code".');
  if (grantTypes.includes("client_credentials") && origin === "dynamic") {
    fail(
      "grant_types",
      'includes "client_credentials", which self-registered clients cannot use: its tokens carry no user. An operator can register a machine client (npx mcp-auth-broker clients add --grant-type client_credentials).',
    );
  }
  if (grantTypes.includes(TOKEN_EXCHANGE) && (origin === "dynamic" || tokenEndpointAuthMethod === "none"))
    fail(
      "grant_types",
      `includes "${TOKEN_EXCHANGE}", which only an MCP server the operator registered as a confidential client may use (npx mcp-auth-broker clients add --grant-type ${TOKEN_EXCHANGE}, then exchangeClients in its entry).`,
    );
  if (grantTypes.includes("client_credentials") && tokenEndpointAuthMethod === "none")
    fail(
      "grant_types",
      '"client_credentials" needs a confidential client (token_endpoint_auth_method client_secret_basic, client_secret_post or private_key_jwt).',
    );
  return { grantTypes, responseTypes, usesCode };
}

/** The redirect URIs, each checked, every refused one named. */
function redirectUrisOf(m: Parsed, usesCode: boolean, tokenEndpointAuthMethod: string, policy: RegistrationPolicy): string[] {
  const redirectUris = [...new Set(m.redirect_uris ?? [])];
  if (usesCode && redirectUris.length === 0) fail("redirect_uris", "is required for the authorization_code grant.", InvalidRedirectUri);
  const rules = { appSchemes: tokenEndpointAuthMethod === "none" && (policy.allowAppSchemeRedirects ?? false) };
  // Every URI is checked and every refused one named: one app-scheme URI beside loopback ones
  // (Cursor) must not hide which one is the problem.
  const refused = redirectUris.flatMap((uri) => {
    const problem = redirectUriProblem(uri, rules);
    return problem ? [`${JSON.stringify(uri)}, which ${problem}`] : [];
  });
  if (refused.length) fail("redirect_uris", `contains ${refused.join("; and ")}.`, InvalidRedirectUri);
  return redirectUris;
}

/**
 * The scopes kept: unknown ones are dropped, not fatal (RFC 7591 §3.2.1: the server may replace
 * requested values; claude.ai registers "scope":"claudeai"). The response says what was kept.
 */
function scopeOf(m: Parsed, policy: RegistrationPolicy): string | null {
  if (m.scope === undefined) return null;
  const supported = policy.scopesSupported ?? SUPPORTED_SCOPES;
  const scopes = [...new Set(m.scope.split(" ").filter(Boolean))].filter((s) => supported.includes(s));
  return scopes.sort().join(" ") || null;
}

export function parseClientMetadata(input: unknown, origin: RegistrationOrigin, policy: RegistrationPolicy = {}): ClientMetadata {
  const parsed = Schema.safeParse(input);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = issue.path.join(".") || "metadata";
    fail(field, `is invalid: ${issue.message}.`, field.startsWith("redirect_uris") ? InvalidRedirectUri : InvalidClientMetadata);
  }
  const m = parsed.data;
  // RFC 7591 §2 defaults; MCP clients send "none" explicitly.
  const tokenEndpointAuthMethod = m.token_endpoint_auth_method ?? "client_secret_basic";
  const { grantTypes, responseTypes, usesCode } = grantsOf(m, tokenEndpointAuthMethod, origin, policy);
  const keys = clientKeysOf(m, tokenEndpointAuthMethod);
  const redirectUris = redirectUrisOf(m, usesCode, tokenEndpointAuthMethod, policy);
  return {
    redirectUris,
    tokenEndpointAuthMethod,
    grantTypes,
    responseTypes,
    scope: scopeOf(m, policy),
    clientName: m.client_name ?? null,
    clientUri: m.client_uri ?? null,
    logoUri: m.logo_uri ?? null,
    softwareId: m.software_id ?? null,
    softwareVersion: m.software_version ?? null,
    fallbackAuthMethod: null,
    ...keys,
    applicationType: applicationTypeOf(m.application_type),
  };
}

/**
 * The key material of a private_key_jwt client: one of jwks_uri and jwks (RFC 7591 §2: never
 * both), and the one algorithm it signs with when it names one. Other methods carry none.
 */
function clientKeysOf(
  m: z.output<typeof Schema>,
  method: string,
): { readonly jwksUri: string | null; readonly jwks: JsonWebKeySet | null; readonly signingAlg: string | null } {
  if (method !== "private_key_jwt") return { jwksUri: null, jwks: null, signingAlg: null };
  if (m.jwks_uri !== undefined && m.jwks !== undefined) fail("jwks", "and jwks_uri are both present: give one of them (RFC 7591 §2).");
  if (m.jwks_uri === undefined && m.jwks === undefined)
    fail("jwks_uri", "is required for token_endpoint_auth_method private_key_jwt (or jwks): where the client's public keys are.");
  let jwks: JsonWebKeySet | null = null;
  if (m.jwks !== undefined) {
    try {
      jwks = parseKeySet(m.jwks);
    } catch (err) {
      fail("jwks", `is invalid: the key set ${firstLine(err)}.`);
    }
  }
  const alg = m.token_endpoint_auth_signing_alg;
  if (alg !== undefined && !ASSERTION_ALGORITHMS.includes(alg))
    fail("token_endpoint_auth_signing_alg", `is ${JSON.stringify(alg)}; this server accepts ${ASSERTION_ALGORITHMS.join(", ")}.`);
  return { jwksUri: m.jwks_uri ?? null, jwks, signingAlg: alg ?? null };
}
