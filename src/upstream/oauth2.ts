// A plain OAuth 2.0 provider configured by its URLs, without discovery: for services that sign
// nobody in but hold a user's data (Linear, Atlassian, Slack, an in-house API) and whose token the
// broker keeps for that user. Authorization code with PKCE S256 (RFC 6749 §4.1, RFC 7636),
// client authentication by client_secret_basic or client_secret_post (RFC 6749 §2.3.1), refresh
// (§6), revocation (RFC 7009). Without ID tokens the account is whatever an optional userinfo URL
// says (a REST "who am I" answering JSON); without one the account has no name.
import { randomBytes } from "node:crypto";
import { z } from "zod";
import { CREDENTIAL_CHECK_CODE, expectCodeRefused, UpstreamError } from "./provider.ts";
import type {
  TokensForIdentity,
  TokensToCheck,
  UpstreamAuthorizationRequest,
  UpstreamCallbackInput,
  UpstreamCheck,
  UpstreamIdentity,
  UpstreamProvider,
  UpstreamTokens,
} from "./provider.ts";
import { classifyFailure, kindOf } from "./errors.ts";
import { s256Challenge } from "../crypto/pkce.ts";
import { createPooledFetch, type PooledAnswer, type PooledFetch, type PooledFetchInit } from "../outbound/pooled-fetch.ts";

/**
 * How the broker proves its client credentials at the token and revocation endpoints (RFC 6749
 * §2.3.1). Basic is the one every authorization server must accept; some services document only
 * the form fields (Linear's and Atlassian's token endpoints list client_id and client_secret as
 * body parameters), so post is there for them.
 */
export type TokenEndpointAuth = "client_secret_basic" | "client_secret_post";

export interface OAuth2ProviderOptions {
  /** Subject prefix and provider name (default `oauth2`). */
  readonly kind?: string;
  readonly displayName: string;
  readonly authorizeUrl: string;
  readonly tokenUrl: string;
  /** RFC 7009 revocation endpoint; without it revoke() does nothing (the token lives until it expires). */
  readonly revokeUrl?: string;
  /**
   * A GET with the access token as Bearer answering the user as JSON (GitHub's /user, Atlassian's
   * /me, Google's userinfo). It names the account and lets check() ask whether the token still
   * works; without it the account has no name and a token counts as good until it expires.
   */
  readonly userinfoUrl?: string;
  /** Field of the userinfo answer with the stable account id (a dotted path for nested answers: `user.id`); default `id`, then `sub`. */
  readonly subjectField?: string;
  /** Field with the account name shown to the user; default `login`, then `username`, `email`, `name`. */
  readonly loginField?: string;
  readonly clientId: string;
  readonly clientSecret: string;
  /** Space-separated scopes (sent as written; omitted when empty). */
  readonly scopes: string;
  readonly timeoutMs: number;
  /** Default client_secret_basic. */
  readonly tokenAuth?: TokenEndpointAuth;
  /** Added to the authorization URL (Atlassian: audience=api.atlassian.com, prompt=consent). */
  readonly extraAuthorizationParams?: Readonly<Record<string, string>>;
  /** Where the operator configured this provider, named in errors that ask them to fix something. */
  readonly settingName?: string;
  /** The HTTP client (default: one of its own, a connection pool per origin). */
  readonly fetch?: PooledFetch;
}

// RFC 6749 §5.1. expires_in as a number or a numeric string (both seen in the wild).
const TokenSuccess = z.object({
  access_token: z.string().min(1),
  token_type: z.string().optional(),
  expires_in: z.coerce.number().optional(),
  refresh_token: z.string().min(1).optional(),
  scope: z.string().optional(),
});
// RFC 6749 §5.2; some servers answer 200 with it (GitHub does), so it is read whatever the status.
const TokenError = z.object({ error: z.string().min(1), error_description: z.string().optional() });
const JsonObject = z.record(z.string(), z.unknown());

/** RFC 6749 §2.3.1 / Appendix B: id and secret are form-urlencoded before they are joined and base64-encoded. */
function formEncode(value: string): string {
  return new URLSearchParams([["", value]]).toString().slice(1);
}

/** A field of a JSON answer, by a dotted path (`user.id`). */
function field(record: Readonly<Record<string, unknown>>, path: string): unknown {
  let value: unknown = record;
  for (const part of path.split(".")) {
    if (value === null || typeof value !== "object") return undefined;
    value = (value as Record<string, unknown>)[part];
  }
  return value;
}

/** A string or number field as text (account ids are often numbers); anything else is absent. */
function text(value: unknown): string | undefined {
  if (typeof value === "string" && value !== "") return value;
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return undefined;
}

export class OAuth2Provider implements UpstreamProvider {
  readonly kind: string;
  readonly displayName: string;

  private readonly http: PooledFetch;
  private readonly tokenAuth: TokenEndpointAuth;
  private readonly setting: string;

  constructor(private readonly options: OAuth2ProviderOptions) {
    this.kind = options.kind ?? "oauth2";
    this.displayName = options.displayName;
    this.tokenAuth = options.tokenAuth ?? "client_secret_basic";
    this.setting = options.settingName ?? `the ${options.displayName} provider's settings`;
    // The provider is the operator's choice (often on an internal network): private addresses allowed.
    this.http = options.fetch ?? createPooledFetch({ allowPrivateNetworks: true, timeoutMs: options.timeoutMs });
  }

  /** One call, read whole, within the client's deadline; 5xx and network failures are `unavailable`. */
  private async request(url: string, init: PooledFetchInit, what: string): Promise<PooledAnswer> {
    try {
      const res = await this.http.answer(url, { ...init, redirect: "manual" });
      if (res.status >= 500) throw new UpstreamError("unavailable", `${what}: ${this.displayName} answered ${res.status}`);
      return res;
    } catch (err) {
      throw classifyFailure(err, what, this.setting);
    }
  }

  /** A form POST to the token or revocation endpoint with the client's credentials (RFC 6749 §2.3.1). */
  private clientPost(url: string, params: Record<string, string>, what: string): Promise<PooledAnswer> {
    const headers: Record<string, string> = {
      Accept: "application/json",
      "Content-Type": "application/x-www-form-urlencoded",
      "User-Agent": "mcp-auth-broker",
    };
    const body = new URLSearchParams(params);
    if (this.tokenAuth === "client_secret_basic") {
      headers.Authorization = `Basic ${Buffer.from(`${formEncode(this.options.clientId)}:${formEncode(this.options.clientSecret)}`).toString("base64")}`;
    } else {
      body.set("client_id", this.options.clientId);
      body.set("client_secret", this.options.clientSecret);
    }
    return this.request(url, { method: "POST", headers, body }, what);
  }

  /** The answer's fields: JSON, or a form body (older servers answer so without Accept's help). */
  private fields(res: PooledAnswer): unknown {
    const body = res.text();
    try {
      return JSON.parse(body);
    } catch {
      if (/application\/x-www-form-urlencoded/i.test(res.header("content-type") ?? "")) return Object.fromEntries(new URLSearchParams(body));
      return null;
    }
  }

  /** An OAuth error answer (RFC 6749 §5.2) as what the broker does about it, with what to fix. */
  private oauthFailure(what: string, status: number, error: string | undefined): UpstreamError {
    // A 401 at the token endpoint is the client's authentication failing (RFC 6749 §5.2
    // invalid_client), even from a server that sends no body with it.
    const kind = error === undefined && status === 401 ? "misconfigured" : kindOf(error, status);
    const said = error ? `${this.displayName} said ${error}` : `${this.displayName} answered ${status}`;
    const other: TokenEndpointAuth = this.tokenAuth === "client_secret_basic" ? "client_secret_post" : "client_secret_basic";
    const hint =
      kind === "misconfigured"
        ? ` (check the client id and secret in ${this.setting}, and whether ${this.displayName} wants ${other} instead of ${this.tokenAuth})`
        : "";
    return new UpstreamError(kind, `${what}: ${said}${hint}`);
  }

  private async tokenRequest(params: Record<string, string>, what: string, previous?: UpstreamTokens): Promise<UpstreamTokens> {
    const res = await this.clientPost(this.options.tokenUrl, params, what);
    const fields = this.fields(res);
    const failed = TokenError.safeParse(fields);
    if (failed.success || !res.ok) throw this.oauthFailure(what, res.status, failed.data?.error);
    const parsed = TokenSuccess.safeParse(fields);
    if (!parsed.success) throw new UpstreamError("protocol", `${what}: ${this.displayName}'s answer is not a token response (status ${res.status})`);
    const body = parsed.data;
    return {
      accessToken: body.access_token,
      // No new refresh token on a refresh: the old one stays good (RFC 6749 §6).
      refreshToken: body.refresh_token ?? previous?.refreshToken,
      accessExpiresAt: body.expires_in && body.expires_in > 0 ? new Date(Date.now() + body.expires_in * 1000) : undefined,
      // Absent on the code's answer: unknown (the server may have granted less than asked).
      // Absent on a refresh's: the scope stays as it was (§6).
      scope: body.scope ?? previous?.scope,
    };
  }

  /** `selectAccount` has no meaning in plain OAuth 2 (no standard prompt): the provider's own page decides. */
  async createAuthorizationRequest(redirectUri: string): Promise<UpstreamAuthorizationRequest> {
    const codeVerifier = randomBytes(32).toString("base64url");
    const state = randomBytes(32).toString("base64url");
    // Parameters already in the configured URL (Atlassian's audience) stay; ours win over them.
    const url = new URL(this.options.authorizeUrl);
    for (const [name, value] of Object.entries(this.options.extraAuthorizationParams ?? {})) url.searchParams.set(name, value);
    url.searchParams.set("response_type", "code");
    url.searchParams.set("client_id", this.options.clientId);
    url.searchParams.set("redirect_uri", redirectUri);
    if (this.options.scopes.trim()) url.searchParams.set("scope", this.options.scopes.trim());
    url.searchParams.set("state", state);
    url.searchParams.set("code_challenge", s256Challenge(codeVerifier));
    url.searchParams.set("code_challenge_method", "S256");
    return { url: url.href, state, codeVerifier };
  }

  async exchangeCode(input: UpstreamCallbackInput, redirectUri: string): Promise<UpstreamTokens> {
    const q = input.callbackUrl.searchParams;
    // State first, error answers included (RFC 6749 §4.1.2.1 echoes it): a forged callback is a
    // protocol failure, never taken for the user's refusal.
    if (q.get("state") !== input.expectedState) throw new UpstreamError("protocol", `state mismatch in ${this.displayName}'s callback`);
    const error = q.get("error");
    if (error === "access_denied") throw new UpstreamError("denied", `the user refused to connect their ${this.displayName} account`);
    if (error) {
      const kind = kindOf(error, undefined);
      throw new UpstreamError(kind === "invalid_grant" ? "protocol" : kind, `${this.displayName} refused the authorization: ${error}`);
    }
    const code = q.get("code");
    if (!code) throw new UpstreamError("protocol", `${this.displayName}'s callback carries no code`);
    return this.tokenRequest(
      { grant_type: "authorization_code", code, redirect_uri: redirectUri, code_verifier: input.codeVerifier },
      `exchanging the ${this.displayName} code`,
    );
  }

  /** The userinfo answer, or the refusal of the token (`invalid_grant`). */
  private async userinfo(url: string, accessToken: string, what: string): Promise<Record<string, unknown>> {
    const res = await this.request(
      url,
      { headers: { Accept: "application/json", Authorization: `Bearer ${accessToken}`, "User-Agent": "mcp-auth-broker" } },
      what,
    );
    if (res.status === 401) throw new UpstreamError("invalid_grant", `${what}: ${this.displayName} refused the token (401)`);
    if (!res.ok) throw new UpstreamError("protocol", `${what}: unexpected status ${res.status}`);
    const parsed = JsonObject.safeParse(await res.json().catch(() => null));
    if (!parsed.success) throw new UpstreamError("protocol", `${what}: ${this.displayName}'s answer is not a JSON object`);
    return parsed.data;
  }

  /**
   * Without a userinfo URL nothing says who the account is: the subject is `<kind>:unknown` and
   * the login empty, for every user (the broker knows whose connection it is; the provider cannot
   * say). Configure userinfoUrl to show an account name.
   */
  async fetchIdentity(tokens: TokensForIdentity): Promise<UpstreamIdentity> {
    if (!this.options.userinfoUrl) return { subject: `${this.kind}:unknown`, login: "", profile: {}, verifiedEmails: [], memberships: [] };
    const what = `reading the ${this.displayName} account`;
    const user = await this.userinfo(this.options.userinfoUrl, tokens.accessToken, what);
    const subjectField = this.options.subjectField ?? "id";
    const id = text(field(user, subjectField)) ?? (this.options.subjectField ? undefined : text(field(user, "sub")));
    if (!id) throw new UpstreamError("protocol", `${what}: the answer has no ${subjectField} field (set the subject field in ${this.setting})`);
    const loginFields = [this.options.loginField ?? "login", "username", "email", "name"];
    const login = loginFields.map((f) => text(field(user, f))).find((v) => v !== undefined) ?? id;
    const email = text(field(user, "email"));
    const name = text(field(user, "name"));
    return {
      subject: `${this.kind}:${id}`,
      login,
      email,
      name,
      profile: { id, login, ...(email ? { email } : {}), ...(name ? { name } : {}) },
      // Plain OAuth 2 has no e-mail_verified: nothing here proves the address is the user's.
      verifiedEmails: [],
      memberships: [],
    };
  }

  async check(tokens: TokensToCheck): Promise<UpstreamCheck> {
    if (tokens.accessExpiresAt && tokens.accessExpiresAt.getTime() <= Date.now()) {
      return tokens.refreshable ? { status: "expired" } : { status: "invalid", reason: `the ${this.displayName} token expired and cannot be refreshed` };
    }
    if (!this.options.userinfoUrl) return { status: "active" };
    try {
      await this.userinfo(this.options.userinfoUrl, tokens.accessToken, `checking the ${this.displayName} token`);
      return { status: "active" };
    } catch (err) {
      // A refused access token with a refresh token held means "renew" (the refresh decides
      // whether the connection is dead), as for the other providers.
      if (err instanceof UpstreamError && err.kind === "invalid_grant") {
        return tokens.refreshable
          ? { status: "expired" }
          : { status: "invalid", reason: `${this.displayName} no longer accepts the token (revoked or expired)` };
      }
      throw err;
    }
  }

  canRefresh(tokens: UpstreamTokens): boolean {
    return Boolean(tokens.refreshToken);
  }

  async refresh(tokens: UpstreamTokens): Promise<UpstreamTokens> {
    if (!tokens.refreshToken) throw new UpstreamError("invalid_grant", `no ${this.displayName} refresh token`);
    return this.tokenRequest({ grant_type: "refresh_token", refresh_token: tokens.refreshToken }, `refreshing the ${this.displayName} token`, tokens);
  }

  /**
   * RFC 7009: the refresh token when one is held (revoking it ends the access tokens of the same
   * grant, §2.1), else the access token. Unknown tokens answer 200, so a second revoke is quiet.
   */
  async revoke(tokens: UpstreamTokens): Promise<void> {
    if (!this.options.revokeUrl) return;
    const [token, hint] = tokens.refreshToken ? [tokens.refreshToken, "refresh_token"] : [tokens.accessToken, "access_token"];
    const what = `revoking the ${this.displayName} token`;
    const res = await this.clientPost(this.options.revokeUrl, { token, token_type_hint: hint }, what);
    if (res.ok) return;
    throw this.oauthFailure(what, res.status, TokenError.safeParse(this.fields(res)).data?.error);
  }

  verifyCredentials(redirectUri: string): Promise<void> {
    return expectCodeRefused(
      this.tokenRequest(
        { grant_type: "authorization_code", code: CREDENTIAL_CHECK_CODE, redirect_uri: redirectUri, code_verifier: randomBytes(32).toString("base64url") },
        `checking the ${this.displayName} client credentials`,
      ),
    );
  }
}
