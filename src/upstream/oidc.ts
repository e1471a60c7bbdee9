// Any OpenID Connect issuer (and Google, and the demo IdP) through openid-client v6: discovery,
// authorization code with PKCE S256, state and nonce, ID token validation, userinfo; checks by
// introspection when the issuer offers it, else userinfo; refresh; revocation.
import * as client from "openid-client";
import { isLoopbackHost } from "../config/load.ts";
import {
  CREDENTIAL_CHECK_CODE,
  expectCodeRefused,
  UpstreamError,
  type UpstreamAuthorizationRequest,
  type UpstreamCallbackInput,
  type UpstreamCheck,
  type UpstreamIdentity,
  type UpstreamProvider,
  type TokensForIdentity,
  type TokensToCheck,
  type UpstreamTokens,
} from "./provider.ts";
import { classifyFailure, refusedAddress } from "./errors.ts";
import { createPooledFetch, type PooledFetch } from "../outbound/pooled-fetch.ts";
import { firstLine } from "../lib/error-text.ts";

export interface OidcProviderOptions {
  /** Subject prefix and provider name: `oidc`, `google`, `demo`. */
  readonly kind: string;
  readonly displayName: string;
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Space-separated scopes; `offline_access` is added when the issuer supports it and `offline` is set. */
  readonly scopes: string;
  readonly timeoutMs: number;
  /** Extra authorization request parameters (Google: access_type=offline, prompt=consent). */
  readonly extraAuthorizationParams?: Readonly<Record<string, string>>;
  /** Ask for offline_access when the issuer lists it, so a refresh token comes back. */
  readonly offline?: boolean;
  /** The claim that carries the user's groups (UPSTREAM_GROUPS_CLAIM). */
  readonly groupsClaim?: string;
  /** The HTTP client (default: one of its own, a connection pool per origin). */
  readonly fetch?: PooledFetch;
}

/** Some IdPs send booleans as strings ("true"); anything else is not a yes. */
const isTrue = (value: unknown): boolean => value === true || value === "true";

/** A groups claim: an array of strings (Keycloak, Okta, Entra, Authentik), or one string. */
function groupsOf(value: unknown): string[] | undefined {
  if (value === undefined) return undefined;
  if (typeof value === "string") return [value];
  if (Array.isArray(value)) return value.filter((v): v is string => typeof v === "string");
  return [];
}

function tokensFrom(response: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers, previous?: UpstreamTokens): UpstreamTokens {
  return {
    accessToken: response.access_token,
    refreshToken: response.refresh_token ?? previous?.refreshToken,
    idToken: response.id_token ?? previous?.idToken,
    // openid-client validated the ID token before returning its claims.
    idTokenClaims: response.claims() ?? previous?.idTokenClaims,
    accessExpiresAt: typeof response.expires_in === "number" ? new Date(Date.now() + response.expires_in * 1000) : undefined,
    scope: response.scope ?? previous?.scope,
  };
}

export class OidcProvider implements UpstreamProvider {
  readonly kind: string;
  readonly displayName: string;
  private configuration: Promise<client.Configuration> | undefined;
  /** The issuer's metadata as discovered (openid-client's serverMetadata() clones it on every call). */
  private metadata: client.ServerMetadata | undefined;
  private readonly http: PooledFetch;

  constructor(private readonly options: OidcProviderOptions) {
    this.kind = options.kind;
    this.displayName = options.displayName;
    // The issuer is the operator's choice (often on an internal network): private addresses allowed.
    this.http = options.fetch ?? createPooledFetch({ allowPrivateNetworks: true, timeoutMs: options.timeoutMs });
  }

  /** Discovery happens once, lazily; a failure is retried on the next use. */
  private config(): Promise<client.Configuration> {
    if (!this.configuration) {
      const issuer = new URL(this.options.issuer);
      const insecure = issuer.protocol === "http:" && isLoopbackHost(issuer.hostname);
      this.configuration = client
        .discovery(issuer, this.options.clientId, this.options.clientSecret, client.ClientSecretBasic(this.options.clientSecret), {
          timeout: Math.ceil(this.options.timeoutMs / 1000),
          [client.customFetch]: this.http,
          // Plain http only for a loopback issuer (the demo IdP, tests); never for real hosts.
          ...(insecure ? { execute: [client.allowInsecureRequests] } : {}),
        })
        .then((config) => {
          // No AbortSignal.timeout of openid-client's per request (0 sends none): the pooled
          // client gives every request a deadline of timeoutMs itself, without the ~10 µs a
          // signal costs to make and the DOMException its timer makes when it fires later.
          config.timeout = 0;
          return config;
        })
        .catch((err: unknown) => {
          this.configuration = undefined;
          throw new UpstreamError(
            "unavailable",
            `cannot reach the OIDC issuer ${this.options.issuer} (discovery failed: ${refusedAddress(err)?.message ?? firstLine(err)}); check UPSTREAM_ISSUER`,
            { cause: err },
          );
        });
    }
    return this.configuration;
  }

  private serverMetadata(config: client.Configuration): client.ServerMetadata {
    this.metadata ??= config.serverMetadata();
    return this.metadata;
  }

  async prepare(): Promise<void> {
    await this.config();
  }

  async verifyCredentials(redirectUri: string): Promise<void> {
    const config = await this.config();
    const what = `checking the client credentials at ${this.options.issuer}`;
    await expectCodeRefused(
      client
        .genericGrantRequest(config, "authorization_code", {
          code: CREDENTIAL_CHECK_CODE,
          redirect_uri: redirectUri,
          code_verifier: client.randomPKCECodeVerifier(),
        })
        .catch((err: unknown) => {
          throw classifyFailure(err, what);
        }),
    );
  }

  private async scopes(config: client.Configuration): Promise<string> {
    const scopes = new Set(this.options.scopes.split(" ").filter(Boolean));
    const supported = this.serverMetadata(config).scopes_supported;
    if (this.options.offline && supported?.includes("offline_access")) scopes.add("offline_access");
    return [...scopes].join(" ");
  }

  async createAuthorizationRequest(redirectUri: string, options: { readonly selectAccount?: boolean } = {}): Promise<UpstreamAuthorizationRequest> {
    const config = await this.config();
    const codeVerifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const nonce = client.randomNonce();
    const params: Record<string, string> = {
      redirect_uri: redirectUri,
      scope: await this.scopes(config),
      code_challenge: await client.calculatePKCECodeChallenge(codeVerifier),
      code_challenge_method: "S256",
      state,
      nonce,
      ...this.options.extraAuthorizationParams,
    };
    // offline_access needs the consent prompt at most issuers to return a refresh token.
    if (params.scope?.split(" ").includes("offline_access") && !params.prompt) params.prompt = "consent";
    // "Not you?": select_account where the issuer has an account picker (Google), else a fresh
    // login (OIDC Core §3.1.2.1 prompt=login), where the user can name another account.
    if (options.selectAccount) {
      const prompts = new Set((params.prompt ?? "").split(" ").filter(Boolean));
      prompts.add(this.kind === "google" ? "select_account" : "login");
      params.prompt = [...prompts].join(" ");
    }
    return { url: client.buildAuthorizationUrl(config, params).href, state, nonce, codeVerifier };
  }

  async exchangeCode(input: UpstreamCallbackInput, redirectUri: string): Promise<UpstreamTokens> {
    const config = await this.config();
    const error = input.callbackUrl.searchParams.get("error");
    if (error === "access_denied") throw new UpstreamError("denied", "the user refused the sign-in at the identity provider");
    // openid-client compares the callback URL with redirect_uri: hand it the registered one.
    const callback = new URL(redirectUri);
    callback.search = input.callbackUrl.search;
    try {
      const response = await client.authorizationCodeGrant(config, callback, {
        pkceCodeVerifier: input.codeVerifier,
        expectedState: input.expectedState,
        expectedNonce: input.expectedNonce,
        idTokenExpected: true,
      });
      return tokensFrom(response);
    } catch (err) {
      throw classifyFailure(err, `the code exchange at ${this.options.issuer} failed`);
    }
  }

  async fetchIdentity(tokens: TokensForIdentity): Promise<UpstreamIdentity> {
    const config = await this.config();
    const claims = tokens.idTokenClaims ?? {};
    const sub = typeof claims.sub === "string" ? claims.sub : undefined;
    let userinfo: Record<string, unknown> = {};
    try {
      userinfo = (await client.fetchUserInfo(config, tokens.accessToken, sub ?? client.skipSubjectCheck)) as Record<string, unknown>;
    } catch (err) {
      if (!sub) throw classifyFailure(err, `reading the user at ${this.options.issuer} failed`);
    }
    const merged = { ...claims, ...userinfo };
    const subject = typeof merged.sub === "string" ? merged.sub : undefined;
    if (!subject) throw new UpstreamError("protocol", "the identity provider returned no subject (sub)");
    const str = (k: string) => (typeof merged[k] === "string" ? (merged[k] as string) : undefined);
    const email = str("email");
    // The claim as the freshest answer gave it: userinfo wins over the ID token when both have it.
    const groupsClaim = this.options.groupsClaim ?? "groups";
    const groups = groupsOf(merged[groupsClaim]);
    return {
      subject: `${this.kind}:${subject}`,
      login: str("preferred_username") ?? email ?? str("name") ?? subject,
      email,
      name: str("name"),
      profile: Object.fromEntries(
        ["sub", "email", "email_verified", "name", "preferred_username", "picture", "hd"].filter((k) => k in merged).map((k) => [k, merged[k]]),
      ),
      // email_verified only vouches for the address of the same answer (userinfo or ID token).
      // As given: the policy folds the case (ASCII only, see grants/glob.ts).
      verifiedEmails: email && isTrue(("email" in userinfo ? userinfo : claims).email_verified) ? [email] : [],
      groups,
      memberships: [],
    };
  }

  async check(tokens: TokensToCheck): Promise<UpstreamCheck> {
    const config = await this.config();
    if (tokens.accessExpiresAt && tokens.accessExpiresAt.getTime() <= Date.now()) return { status: "expired" };
    if (this.serverMetadata(config).introspection_endpoint) {
      try {
        const result = await client.tokenIntrospection(config, tokens.accessToken);
        if (!result.active)
          return tokens.refreshable ? { status: "expired" } : { status: "invalid", reason: "the identity provider reports the token inactive" };
        return { status: "active", accessExpiresAt: typeof result.exp === "number" ? new Date(result.exp * 1000) : undefined };
      } catch (err) {
        throw classifyFailure(err, `token introspection at ${this.options.issuer} failed`);
      }
    }
    try {
      await client.fetchUserInfo(config, tokens.accessToken, client.skipSubjectCheck);
      return { status: "active" };
    } catch (err) {
      const failure = classifyFailure(err, `userinfo at ${this.options.issuer} failed`);
      if (failure.kind === "invalid_grant" || failure.kind === "denied") {
        return tokens.refreshable ? { status: "expired" } : { status: "invalid", reason: "the identity provider refused the token" };
      }
      throw failure;
    }
  }

  canRefresh(tokens: UpstreamTokens): boolean {
    return Boolean(tokens.refreshToken);
  }

  async refresh(tokens: UpstreamTokens): Promise<UpstreamTokens> {
    if (!tokens.refreshToken) throw new UpstreamError("invalid_grant", "no upstream refresh token");
    const config = await this.config();
    try {
      const response = await client.refreshTokenGrant(config, tokens.refreshToken);
      return tokensFrom(response, tokens);
    } catch (err) {
      throw classifyFailure(err, `refreshing the upstream token at ${this.options.issuer} failed`);
    }
  }

  async revoke(tokens: UpstreamTokens): Promise<void> {
    const config = await this.config();
    if (!this.serverMetadata(config).revocation_endpoint) return;
    try {
      if (tokens.refreshToken) await client.tokenRevocation(config, tokens.refreshToken, { token_type_hint: "refresh_token" });
      await client.tokenRevocation(config, tokens.accessToken, { token_type_hint: "access_token" });
    } catch (err) {
      throw classifyFailure(err, `token revocation at ${this.options.issuer} failed`);
    }
  }
}
