// The one interface every upstream identity provider implements. Nothing outside src/upstream/
// knows which provider is configured: no provider-specific branches elsewhere.

/** Tokens the upstream IdP issued to the broker for one user. */
export interface UpstreamTokens {
  readonly accessToken: string;
  readonly refreshToken?: string | undefined;
  readonly idToken?: string | undefined;
  /**
   * The claims of the ID token, as the provider validated it (signature, issuer, audience, nonce)
   * when the tokens were issued. Only these count as identity; the raw idToken is never decoded.
   * Not stored: present only on the tokens of the exchange (or refresh) that returned them.
   */
  readonly idTokenClaims?: Readonly<Record<string, unknown>> | undefined;
  /** Absolute expiry of the access token, when the IdP says. */
  readonly accessExpiresAt?: Date | undefined;
  readonly scope?: string | undefined;
}

/**
 * What a check of a stored session needs: the access token, and only whether a refresh token is
 * held (an inactive access token then means "renew", not "dead"). The refresh token itself stays
 * encrypted until a refresh uses it.
 */
export interface TokensToCheck {
  readonly accessToken: string;
  readonly accessExpiresAt?: Date | undefined;
  readonly refreshable: boolean;
}

/** What reading the identity again needs: the access token, its scopes (GitHub), validated ID token claims when fresh (OIDC). */
export type TokensForIdentity = Pick<UpstreamTokens, "accessToken" | "scope" | "idTokenClaims">;

/** The check's view of a full set of tokens. */
export function toCheck(tokens: UpstreamTokens): TokensToCheck {
  return { accessToken: tokens.accessToken, accessExpiresAt: tokens.accessExpiresAt, refreshable: Boolean(tokens.refreshToken) };
}

/** Who logged in upstream. */
export interface UpstreamIdentity {
  /** Stable id with provider prefix: `github:12345`, `google:1098…`, `oidc:<sub>`, `demo:<sub>`. */
  readonly subject: string;
  /** Display login or e-mail (sent to the MCP server as X-Auth-User). */
  readonly login: string;
  readonly email?: string | undefined;
  readonly name?: string | undefined;
  /** Provider-specific profile fields worth keeping (no tokens). */
  readonly profile: Readonly<Record<string, unknown>>;
  /**
   * Every e-mail address the IdP says the user proved they own, lower-cased (GitHub: verified
   * entries of /user/emails; OIDC: `email` when `email_verified` is true). Only these count for
   * e-mail rules: an unverified address is anyone's to type.
   */
  readonly verifiedEmails: readonly string[];
  /**
   * OIDC: the values of the groups claim (UPSTREAM_GROUPS_CLAIM); undefined when this answer did
   * not carry the claim at all (userinfo without it), as opposed to an empty list.
   */
  readonly groups?: readonly string[] | undefined;
  /**
   * GitHub: which of the ALLOWED_GITHUB_ORGS entries (`acme`, `acme/platform`) the user is an
   * active member of, read with the user's token. Empty when no org rule is configured.
   */
  readonly memberships: readonly string[];
}

/** What the broker keeps per authorization transaction for the upstream leg. */
export interface UpstreamAuthorizationRequest {
  /** Where to send the user's browser. */
  readonly url: string;
  readonly state: string;
  readonly nonce?: string | undefined;
  /** PKCE verifier for the upstream leg (stored encrypted until the callback). */
  readonly codeVerifier: string;
}

export interface UpstreamCallbackInput {
  /** The full callback URL as received (query includes code, state, iss...). */
  readonly callbackUrl: URL;
  readonly expectedState: string;
  readonly expectedNonce?: string | undefined;
  readonly codeVerifier: string;
}

/** Result of checking an upstream session. */
export type UpstreamCheck =
  | { readonly status: "active"; readonly accessExpiresAt?: Date | undefined }
  /** The upstream token is revoked or otherwise invalid: the grant must die. */
  | { readonly status: "invalid"; readonly reason: string }
  /** The upstream access token has expired: refresh it (if possible) and check again. */
  | { readonly status: "expired" };

/**
 * Errors a provider raises. `kind` decides what the broker does:
 * - `denied`: the user or IdP refused (access_denied to the client)
 * - `invalid_grant`: a code/refresh token was refused (refresh refused → grant revoked)
 * - `unavailable`: network error, timeout or 5xx (503 + Retry-After, fail closed, retry later)
 * - `misconfigured`: wrong client credentials, wrong callback URL... (operator must act)
 * - `protocol`: the response broke the protocol (bad state, bad ID token...)
 */
export class UpstreamError extends Error {
  constructor(
    readonly kind: "denied" | "invalid_grant" | "unavailable" | "misconfigured" | "protocol",
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "UpstreamError";
  }
}

export interface UpstreamProvider {
  /** `github`, `google`, `oidc`, `demo`: the prefix of subjects and the name shown to users. */
  readonly kind: string;
  /** Human name for the consent page ("GitHub", "Google", "Example IdP"). */
  readonly displayName: string;
  /**
   * Builds the upstream authorization URL (PKCE S256, state, nonce where applicable). With
   * `selectAccount` the IdP is asked to let the user choose (or sign in with) another account
   * instead of silently reusing the one it has a session for ("not you?").
   */
  createAuthorizationRequest(redirectUri: string, options?: { readonly selectAccount?: boolean }): Promise<UpstreamAuthorizationRequest>;
  /** Exchanges the callback's code; validates state (and ID token/nonce for OIDC). */
  exchangeCode(input: UpstreamCallbackInput, redirectUri: string): Promise<UpstreamTokens>;
  /** Reads the user's identity with fresh tokens. */
  fetchIdentity(tokens: TokensForIdentity): Promise<UpstreamIdentity>;
  /** Is this upstream session still good? */
  check(tokens: TokensToCheck): Promise<UpstreamCheck>;
  /** True when `refresh` can be attempted for these tokens. */
  canRefresh(tokens: UpstreamTokens): boolean;
  /** Uses the upstream refresh token; returns the new tokens (refresh token may rotate). */
  refresh(tokens: UpstreamTokens): Promise<UpstreamTokens>;
  /** Best-effort revocation of the upstream token. */
  revoke(tokens: UpstreamTokens): Promise<void>;
  /** Optional start-up check (OIDC discovery), so configuration problems show at once. */
  prepare?(): Promise<void>;
  /**
   * Proves the broker's client credentials without a user: a made-up code is exchanged, and the
   * IdP answers "bad code" only after it has accepted the client. Resolves when it did; throws
   * UpstreamError (`misconfigured`, `unavailable`, `protocol`) otherwise.
   */
  verifyCredentials(redirectUri: string): Promise<void>;
}

/** The code sent by verifyCredentials: no IdP ever issued it. */
export const CREDENTIAL_CHECK_CODE = "mcp-auth-broker-credential-check";

/** The outcome of a made-up code exchange: refused as a bad code means the client was accepted. */
export async function expectCodeRefused(exchange: Promise<unknown>): Promise<void> {
  try {
    await exchange;
  } catch (err) {
    if (err instanceof UpstreamError && err.kind === "invalid_grant") return;
    throw err;
  }
  throw new UpstreamError("protocol", "the identity provider accepted an authorization code it never issued");
}
