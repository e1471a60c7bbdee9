// GitHub (github.com or GitHub Enterprise Server) as the upstream IdP: OAuth apps and GitHub Apps
// with expiring user tokens. Endpoints as GitHub documents them; the token check and revocation
// use the application endpoints, authenticated with the app's client id and secret. For the access
// policy, fetchIdentity also reads the verified e-mails and the ALLOWED_GITHUB_ORGS memberships
// with the user's own token.
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
import type { GitHubOrgRule } from "../config/access-policy.ts";
import { createPooledFetch, type PooledAnswer, type PooledFetch, type PooledFetchInit } from "../outbound/pooled-fetch.ts";

export interface GitHubProviderOptions {
  readonly clientId: string;
  readonly clientSecret: string;
  /** https://github.com or the GHES base URL */
  readonly githubUrl: string;
  /** https://api.github.com or https://ghe.example.com/api/v3 */
  readonly apiUrl: string;
  readonly scopes: string;
  readonly timeoutMs: number;
  readonly displayName?: string;
  /** ALLOWED_GITHUB_ORGS: the org/team memberships fetchIdentity reads (needs read:org). */
  readonly orgRules?: readonly GitHubOrgRule[];
  /**
   * Where a membership GitHub refused to show (403: SAML SSO, an OAuth app restriction) is noted;
   * a pino logger fits. Only the rule, the login, the status and GitHub's message are passed.
   */
  readonly log?: { warn(fields: Record<string, unknown>, message: string): void };
  /** The HTTP client (default: one of its own, a connection pool per origin). */
  readonly fetch?: PooledFetch;
}

const TokenResponse = z.union([
  z.object({
    access_token: z.string().min(1),
    token_type: z.string().optional(),
    scope: z.string().optional(),
    expires_in: z.coerce.number().optional(),
    refresh_token: z.string().optional(),
    refresh_token_expires_in: z.coerce.number().optional(),
  }),
  z.object({ error: z.string(), error_description: z.string().optional() }),
]);

const User = z.object({
  id: z.number(),
  login: z.string(),
  name: z.string().nullish(),
  email: z.string().nullish(),
  avatar_url: z.string().nullish(),
  html_url: z.string().nullish(),
});
// GET /user/emails ("List email addresses for the authenticated user", needs user:email):
// [{ email, primary, verified, visibility }].
const Emails = z.array(z.object({ email: z.string(), primary: z.boolean(), verified: z.boolean() }));
// The error body of every REST endpoint: { message, documentation_url }.
const ApiError = z.object({ message: z.string().optional() });
// GET /orgs/{org}/teams/{team_slug}/memberships/{username}: { url, role, state: active | pending }.
const TeamMembership = z.object({ state: z.string(), role: z.string().optional() });

/** What a membership answer counts as. */
type MembershipAnswer = "member" | "not_member";

/**
 * GitHub's rate limits answer 403 or 429, with x-ratelimit-remaining 0 (primary) or a message
 * saying so and maybe retry-after (secondary) ("Rate limits for the REST API"). That says nothing
 * about the user: retry later, never count it as "not a member".
 */
function rateLimited(res: PooledAnswer, message: string | undefined): boolean {
  if (res.status === 429) return true;
  return res.status === 403 && (res.header("x-ratelimit-remaining") === "0" || res.header("retry-after") !== null || /rate limit/i.test(message ?? ""));
}

export class GitHubProvider implements UpstreamProvider {
  readonly kind = "github";
  readonly displayName: string;

  private readonly http: PooledFetch;

  constructor(private readonly options: GitHubProviderOptions) {
    this.displayName = options.displayName ?? "GitHub";
    // GitHub is the operator's choice (GHES often on an internal network): private addresses allowed.
    this.http = options.fetch ?? createPooledFetch({ allowPrivateNetworks: true, timeoutMs: options.timeoutMs });
  }

  /** One call to GitHub, read whole (no WHATWG Response: see pooled-fetch.ts), within the client's deadline (timeoutMs). */
  private async request(url: string, init: PooledFetchInit, what: string): Promise<PooledAnswer> {
    try {
      const res = await this.http.answer(url, { ...init, redirect: "manual" });
      if (res.status >= 500) throw new UpstreamError("unavailable", `${what}: GitHub answered ${res.status}`);
      return res;
    } catch (err) {
      throw classifyFailure(err, what, "GITHUB_URL / GITHUB_API_URL");
    }
  }

  private apiHeaders(extra: Record<string, string> = {}): Record<string, string> {
    return { Accept: "application/vnd.github+json", "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "mcp-auth-broker", ...extra };
  }

  private appAuth(): string {
    return `Basic ${Buffer.from(`${this.options.clientId}:${this.options.clientSecret}`).toString("base64")}`;
  }

  async createAuthorizationRequest(redirectUri: string, options: { readonly selectAccount?: boolean } = {}): Promise<UpstreamAuthorizationRequest> {
    const codeVerifier = randomBytes(32).toString("base64url");
    const state = randomBytes(32).toString("base64url");
    const url = new URL(`${this.options.githubUrl}/login/oauth/authorize`);
    url.searchParams.set("client_id", this.options.clientId);
    url.searchParams.set("redirect_uri", redirectUri);
    url.searchParams.set("scope", this.options.scopes);
    url.searchParams.set("state", state);
    url.searchParams.set("code_challenge", s256Challenge(codeVerifier));
    url.searchParams.set("code_challenge_method", "S256");
    url.searchParams.set("allow_signup", "true");
    // GitHub's account picker (documented for /login/oauth/authorize since 2023).
    if (options.selectAccount) url.searchParams.set("prompt", "select_account");
    return { url: url.href, state, codeVerifier };
  }

  /** POST /login/oauth/access_token: GitHub answers 200 even for errors, with an `error` field. */
  private async tokenRequest(params: Record<string, string>, what: string, previous?: UpstreamTokens): Promise<UpstreamTokens> {
    const res = await this.request(
      `${this.options.githubUrl}/login/oauth/access_token`,
      {
        method: "POST",
        headers: { Accept: "application/json", "Content-Type": "application/x-www-form-urlencoded", "User-Agent": "mcp-auth-broker" },
        body: new URLSearchParams({ client_id: this.options.clientId, client_secret: this.options.clientSecret, ...params }),
      },
      what,
    );
    const parsed = TokenResponse.safeParse(await res.json().catch(() => null));
    if (!parsed.success) throw new UpstreamError("protocol", `${what}: GitHub's answer was not a token response (status ${res.status})`);
    const body = parsed.data;
    if ("error" in body) {
      const kind = body.error === "bad_verification_code" || body.error === "bad_refresh_token" ? "invalid_grant" : kindOf(body.error, res.status);
      const hint =
        body.error === "incorrect_client_credentials"
          ? " (check UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET)"
          : body.error === "redirect_uri_mismatch"
            ? " (register PUBLIC_URL/oauth/callback as the callback URL of the GitHub app)"
            : "";
      throw new UpstreamError(kind, `${what}: GitHub said ${body.error}${hint}`);
    }
    return {
      accessToken: body.access_token,
      refreshToken: body.refresh_token ?? previous?.refreshToken,
      accessExpiresAt: body.expires_in ? new Date(Date.now() + body.expires_in * 1000) : undefined,
      scope: body.scope ?? previous?.scope,
    };
  }

  async exchangeCode(input: UpstreamCallbackInput, redirectUri: string): Promise<UpstreamTokens> {
    const q = input.callbackUrl.searchParams;
    if (q.get("error") === "access_denied") throw new UpstreamError("denied", "the user refused to authorize the GitHub app");
    if (q.get("state") !== input.expectedState) throw new UpstreamError("protocol", "state mismatch in GitHub's callback");
    const code = q.get("code");
    if (!code) throw new UpstreamError("protocol", "GitHub's callback carries no code");
    return this.tokenRequest({ code, redirect_uri: redirectUri, code_verifier: input.codeVerifier }, "exchanging the GitHub code");
  }

  async fetchIdentity(tokens: TokensForIdentity): Promise<UpstreamIdentity> {
    const res = await this.request(
      `${this.options.apiUrl}/user`,
      { headers: this.apiHeaders({ Authorization: `Bearer ${tokens.accessToken}` }) },
      "reading the GitHub user",
    );
    if (!res.ok) {
      throw new UpstreamError(res.status === 401 ? "invalid_grant" : "protocol", `reading the GitHub user: status ${res.status}`);
    }
    const parsed = User.safeParse(await res.json().catch(() => null));
    if (!parsed.success) throw new UpstreamError("protocol", "GitHub's /user answer is not a user");
    const user = parsed.data;
    // E-mails and memberships only need the login: read them all at once.
    const [emails, memberships] = await Promise.all([this.fetchEmails(tokens), this.fetchMemberships(tokens, user.login)]);
    return {
      subject: `github:${user.id}`,
      login: user.login,
      email: emails.find((e) => e.primary && e.verified)?.email ?? user.email ?? undefined,
      name: user.name ?? undefined,
      profile: { id: user.id, login: user.login, name: user.name ?? null, avatar_url: user.avatar_url ?? null, html_url: user.html_url ?? null },
      // Only verified addresses prove anything: an unverified one (even the primary) is anyone's to type.
      // As GitHub wrote them: the policy folds the case (ASCII only; toLowerCase() would turn a
      // look-alike "\u212Aaka.com" into kaka.com).
      verifiedEmails: [...new Set(emails.filter((e) => e.verified).map((e) => e.email))],
      memberships,
    };
  }

  /**
   * GET /user/emails, when the token may read it: OAuth tokens with `user:email` or `user`, and
   * GitHub App user tokens (no scopes; the app's "Email addresses" permission decides). A token
   * that may not read them gets 404/403: no addresses, not an error.
   */
  private async fetchEmails(tokens: TokensForIdentity): Promise<z.infer<typeof Emails>> {
    const scopes = (tokens.scope ?? "").split(/[ ,]+/).filter(Boolean);
    if (scopes.length && !scopes.includes("user:email") && !scopes.includes("user")) return [];
    const what = "reading the GitHub e-mails";
    const res = await this.request(`${this.options.apiUrl}/user/emails`, { headers: this.apiHeaders({ Authorization: `Bearer ${tokens.accessToken}` }) }, what);
    if (res.status === 200) {
      const list = Emails.safeParse(await res.json().catch(() => null));
      if (!list.success) throw new UpstreamError("protocol", `${what}: GitHub's answer is not a list of e-mails`);
      return list.data;
    }
    const message = ApiError.safeParse(await res.json().catch(() => null)).data?.message;
    if (res.status === 401) throw new UpstreamError("invalid_grant", `${what}: GitHub refused the token (401)`);
    if (rateLimited(res, message)) throw new UpstreamError("unavailable", `${what}: GitHub's rate limit was reached (${res.status})`);
    return [];
  }

  /** The ALLOWED_GITHUB_ORGS entries (as written: `acme`, `acme/platform`) the user is an active member of. */
  private async fetchMemberships(tokens: TokensForIdentity, login: string): Promise<string[]> {
    const rules = this.options.orgRules ?? [];
    const answers = await Promise.all(rules.map((rule) => this.fetchMembership(tokens, rule, login)));
    return rules.filter((_, i) => answers[i] === "member").map((rule) => (rule.team ? `${rule.org}/${rule.team}` : rule.org));
  }

  /**
   * One org or team rule, read with the user's token (works the same on GHES under its apiUrl):
   * - org: GET /orgs/{org}/members/{username} ("Check organization membership for a user"):
   *   204 member; 404 not a member; 302 (to public_members) when GitHub does not count the
   *   requester as a member, or the token lacks read:org to see private membership: not a member.
   * - team: GET /orgs/{org}/teams/{team_slug}/memberships/{username} ("Get team membership for a
   *   user"): 200 with state "active" member, "pending" (invitation not accepted) not; 404 not
   *   (or the team is not visible to this token).
   * - 401: the token is dead (invalid_grant). 403: GitHub refuses to show it (SAML SSO not
   *   authorized for this token, an OAuth app access restriction): not a member, noted in the log.
   *   403/429 from a rate limit, 5xx, network: unavailable (retry; never decide "not a member").
   */
  private async fetchMembership(tokens: TokensForIdentity, rule: GitHubOrgRule, login: string): Promise<MembershipAnswer> {
    const label = rule.team ? `${rule.org}/${rule.team}` : rule.org;
    const what = `reading the GitHub membership in ${label}`;
    const org = encodeURIComponent(rule.org);
    const user = encodeURIComponent(login);
    const url = rule.team
      ? `${this.options.apiUrl}/orgs/${org}/teams/${encodeURIComponent(rule.team)}/memberships/${user}`
      : `${this.options.apiUrl}/orgs/${org}/members/${user}`;
    const res = await this.request(url, { headers: this.apiHeaders({ Authorization: `Bearer ${tokens.accessToken}` }) }, what);
    if (rule.team && res.status === 200) {
      const membership = TeamMembership.safeParse(await res.json().catch(() => null));
      if (!membership.success) throw new UpstreamError("protocol", `${what}: GitHub's answer is not a team membership`);
      return membership.data.state === "active" ? "member" : "not_member";
    }
    if (!rule.team && res.status === 204) return "member";
    if (res.status === 404 || (!rule.team && res.status === 302)) return "not_member";
    const message = ApiError.safeParse(await res.json().catch(() => null)).data?.message;
    if (res.status === 401) throw new UpstreamError("invalid_grant", `${what}: GitHub refused the token (401)`);
    if (rateLimited(res, message)) throw new UpstreamError("unavailable", `${what}: GitHub's rate limit was reached (${res.status})`);
    if (res.status === 403) {
      // Not the X-GitHub-SSO header: its URL carries an authorization request meant for the user.
      this.options.log?.warn(
        { rule: label, login, status: res.status, samlSso: res.header("x-github-sso") !== null, githubMessage: message?.slice(0, 200) },
        "GitHub refused to show an organization membership: counted as not a member",
      );
      return "not_member";
    }
    throw new UpstreamError("protocol", `${what}: unexpected status ${res.status}`);
  }

  async check(tokens: TokensToCheck): Promise<UpstreamCheck> {
    if (tokens.accessExpiresAt && tokens.accessExpiresAt.getTime() <= Date.now()) return { status: "expired" };
    const res = await this.request(
      `${this.options.apiUrl}/applications/${encodeURIComponent(this.options.clientId)}/token`,
      {
        method: "POST",
        headers: this.apiHeaders({ Authorization: this.appAuth(), "Content-Type": "application/json" }),
        body: JSON.stringify({ access_token: tokens.accessToken }),
      },
      "checking the GitHub token",
    );
    if (res.status === 200) return { status: "active" };
    if (res.status === 404 || res.status === 422) return { status: "invalid", reason: "GitHub no longer knows this token (revoked or expired)" };
    if (res.status === 401 || res.status === 403)
      throw new UpstreamError("misconfigured", `checking the GitHub token: status ${res.status} (check UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET)`);
    throw new UpstreamError("protocol", `checking the GitHub token: unexpected status ${res.status}`);
  }

  verifyCredentials(redirectUri: string): Promise<void> {
    return expectCodeRefused(this.tokenRequest({ code: CREDENTIAL_CHECK_CODE, redirect_uri: redirectUri }, "checking the GitHub app credentials"));
  }

  canRefresh(tokens: UpstreamTokens): boolean {
    return Boolean(tokens.refreshToken);
  }

  async refresh(tokens: UpstreamTokens): Promise<UpstreamTokens> {
    if (!tokens.refreshToken) throw new UpstreamError("invalid_grant", "no GitHub refresh token");
    return this.tokenRequest({ grant_type: "refresh_token", refresh_token: tokens.refreshToken }, "refreshing the GitHub token", tokens);
  }

  async revoke(tokens: UpstreamTokens): Promise<void> {
    const res = await this.request(
      `${this.options.apiUrl}/applications/${encodeURIComponent(this.options.clientId)}/token`,
      {
        method: "DELETE",
        headers: this.apiHeaders({ Authorization: this.appAuth(), "Content-Type": "application/json" }),
        body: JSON.stringify({ access_token: tokens.accessToken }),
      },
      "revoking the GitHub token",
    );
    if (res.status !== 204 && res.status !== 404 && res.status !== 422) throw new UpstreamError("protocol", `revoking the GitHub token: status ${res.status}`);
  }
}
