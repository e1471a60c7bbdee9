// A GitHub emulator that speaks GitHub's real OAuth and REST endpoints, as GitHub Enterprise
// Server lays them out on one origin: /login/oauth/* for OAuth, /api/v3/* for the API. It
// supports OAuth apps and GitHub Apps with expiring user tokens, and has controls for tests:
// revoke a user's tokens, expire them now, an outage (503 or hang), and call counters. For access
// policies it keeps per-user e-mail lists (verified or not) and organizations with teams, and
// answers GitHub's membership endpoints as GitHub does for what the token may see.
import type http from "node:http";
import { EmulatorServer } from "./emulator-server.ts";
import { createHash, randomBytes } from "node:crypto";

export interface EmulatedUser {
  readonly id: number;
  readonly login: string;
  readonly email: string;
}

/** One entry of GET /user/emails, in GitHub's shape. */
export interface EmulatedEmail {
  readonly email: string;
  readonly primary: boolean;
  readonly verified: boolean;
  readonly visibility?: "public" | "private" | null;
}

interface OrgMember {
  public: boolean;
  role: "admin" | "member";
}

interface TeamMember {
  state: "active" | "pending";
  role: "member" | "maintainer";
}

interface TeamRecord {
  readonly id: number;
  readonly slug: string;
  readonly members: Map<string, TeamMember>;
}

interface OrgRecord {
  readonly id: number;
  readonly login: string;
  readonly members: Map<string, OrgMember>;
  readonly teams: Map<string, TeamRecord>;
  /** SAML SSO enforced, and no OAuth token of the emulator is authorized for it. */
  samlSso: boolean;
}

interface TokenRecord {
  user: EmulatedUser;
  scope: string;
  expiresAt: number | null;
  refreshToken: string | null;
}

interface CodeRecord {
  user: EmulatedUser;
  redirectUri: string;
  challenge: string | null;
  scope: string;
  expiresAt: number;
}

export interface GitHubEmulatorOptions {
  readonly clientId: string;
  readonly clientSecret: string;
  /** GitHub App mode: user tokens expire after this many seconds and come with refresh tokens. */
  readonly expiringTokensSeconds?: number;
}

const KNOWN_USERS: Record<string, number> = { octocat: 583231, hubot: 480938, monalisa: 2 };

/** Route patterns counted under one name ("GET /api/v3/orgs/:org/members/:user"), with their parameters. */
const PATTERNS: readonly { readonly re: RegExp; readonly name: string }[] = [
  { re: /^\/api\/v3\/applications\/([^/]+)\/token$/, name: "/api/v3/applications/:id/token" },
  { re: /^\/api\/v3\/orgs\/([^/]+)\/members\/([^/]+)$/, name: "/api/v3/orgs/:org/members/:user" },
  { re: /^\/api\/v3\/orgs\/([^/]+)\/public_members\/([^/]+)$/, name: "/api/v3/orgs/:org/public_members/:user" },
  { re: /^\/api\/v3\/orgs\/([^/]+)\/teams\/([^/]+)\/memberships\/([^/]+)$/, name: "/api/v3/orgs/:org/teams/:team/memberships/:user" },
];

/** Scopes that let an OAuth token read private organization and team membership (write/admin imply read). */
const READ_ORG_SCOPES = ["read:org", "write:org", "admin:org"];

function scopesOf(record: { readonly scope: string }): string[] {
  return record.scope.split(/[ ,]+/).filter(Boolean);
}

export class GitHubEmulator extends EmulatorServer {
  /** When set, /login/oauth/authorize approves at once as this user (tests without a browser). */
  autoApprove: string | null = null;
  /** "503": every request fails; "hang": requests never get an answer. */
  outage: null | "503" | "hang" = null;
  expiringTokensSeconds: number | undefined;

  private readonly codes = new Map<string, CodeRecord>();
  private readonly tokens = new Map<string, TokenRecord>();
  private readonly refreshTokens = new Map<string, { user: EmulatedUser; scope: string }>();
  private nextId = 1000;
  private readonly users = new Map<string, EmulatedUser>();
  private readonly emails = new Map<string, readonly EmulatedEmail[]>();
  private readonly orgs = new Map<string, OrgRecord>();
  private readonly failures = new Map<string, number>();
  private readonly holds = new Map<string, { arrivals: number; readonly listeners: (() => void)[]; readonly released: Promise<void> }>();

  constructor(private readonly options: GitHubEmulatorOptions) {
    super();
    this.expiringTokensSeconds = options.expiringTokensSeconds;
  }

  get apiUrl(): string {
    return `${this.url}/api/v3`;
  }

  /** The broker's settings for logging in through this emulator as its registered app. */
  brokerEnv(): Record<string, string> {
    return {
      UPSTREAM_PROVIDER: "github",
      UPSTREAM_CLIENT_ID: this.options.clientId,
      UPSTREAM_CLIENT_SECRET: this.options.clientSecret,
      GITHUB_URL: this.url,
      GITHUB_API_URL: this.apiUrl,
    };
  }

  user(login: string): EmulatedUser {
    const key = login.toLowerCase();
    let u = this.users.get(key);
    if (!u) {
      u = { id: KNOWN_USERS[key] ?? this.nextId++, login: key, email: `${key}@users.noreply.example` };
      this.users.set(key, u);
    }
    return u;
  }

  count(key: string): number {
    return this.calls.get(key) ?? 0;
  }

  /** Revokes every token of a user, as "Revoke access" in GitHub's settings does. */
  revokeUser(login: string): void {
    for (const [t, r] of this.tokens) if (r.user.login === login) this.tokens.delete(t);
    for (const [t, r] of this.refreshTokens) if (r.user.login === login) this.refreshTokens.delete(t);
  }

  /** Makes every access token of a user expired now (refresh tokens stay valid). */
  expireUser(login: string): void {
    for (const r of this.tokens.values()) if (r.user.login === login) r.expiresAt = Date.now() - 1000;
  }

  /** Replaces the list GET /user/emails returns for this user (default: one verified primary address). */
  setEmails(login: string, emails: readonly EmulatedEmail[]): void {
    this.emails.set(
      login.toLowerCase(),
      emails.map((e) => ({ ...e })),
    );
  }

  /** The list GET /user/emails returns for this user. */
  emailsOf(login: string): readonly EmulatedEmail[] {
    const user = this.user(login);
    return this.emails.get(user.login) ?? [{ email: user.email, primary: true, verified: true, visibility: "private" }];
  }

  private org(name: string): OrgRecord {
    const key = name.toLowerCase();
    let org = this.orgs.get(key);
    if (!org) {
      org = { id: this.nextId++, login: name, members: new Map(), teams: new Map(), samlSso: false };
      this.orgs.set(key, org);
    }
    return org;
  }

  private team(org: string, slug: string): TeamRecord {
    const o = this.org(org);
    const key = slug.toLowerCase();
    let team = o.teams.get(key);
    if (!team) {
      team = { id: this.nextId++, slug: key, members: new Map() };
      o.teams.set(key, team);
    }
    return team;
  }

  /** Makes `login` an active member of `org` (created on first use); private membership unless `public`. */
  addOrgMember(org: string, login: string, options: { readonly public?: boolean; readonly role?: "admin" | "member" } = {}): void {
    this.org(org).members.set(login.toLowerCase(), { public: options.public ?? false, role: options.role ?? "member" });
  }

  /** Removes `login` from `org` and from every team of it, as GitHub does. */
  removeOrgMember(org: string, login: string): void {
    const o = this.org(org);
    o.members.delete(login.toLowerCase());
    for (const team of o.teams.values()) team.members.delete(login.toLowerCase());
  }

  /**
   * Adds `login` to the team `org/team` (both created on first use). `active` (the default) also
   * makes them an org member, as they must be; `pending` is an invitation not yet accepted.
   */
  addTeamMember(
    org: string,
    team: string,
    login: string,
    options: { readonly state?: "active" | "pending"; readonly role?: "member" | "maintainer" } = {},
  ): void {
    const state = options.state ?? "active";
    if (state === "active" && !this.org(org).members.has(login.toLowerCase())) this.addOrgMember(org, login);
    this.team(org, team).members.set(login.toLowerCase(), { state, role: options.role ?? "member" });
  }

  removeTeamMember(org: string, team: string, login: string): void {
    this.team(org, team).members.delete(login.toLowerCase());
  }

  /**
   * SAML SSO enforced at `org` and no token authorized for it: its membership endpoints answer 403
   * with an X-GitHub-SSO header, as GitHub does for a token not authorized for the organization.
   */
  requireSamlSso(org: string, required = true): void {
    this.org(org).samlSso = required;
  }

  /**
   * Makes every request counted under `key` ("GET /api/v3/orgs/:org/members/:user", "GET /api/v3/user")
   * answer `status` with GitHub's body for it (401 Bad credentials, 403/429 rate limit, 5xx); null ends it.
   */
  failRoute(key: string, status: number | null): void {
    if (status === null) this.failures.delete(key);
    else this.failures.set(key, status);
  }

  /**
   * Holds every request counted under `key` unanswered until `release()`; `arrived(n)` resolves
   * once n of them are waiting. Shows which calls are in flight together, without timing.
   */
  holdRoute(key: string): { arrived(count: number): Promise<void>; release(): void } {
    let release!: () => void;
    const hold = { arrivals: 0, listeners: [] as (() => void)[], released: new Promise<void>((r) => (release = r)) };
    this.holds.set(key, hold);
    return {
      arrived: (count) =>
        new Promise<void>((resolve) => {
          const check = (): void => {
            if (hold.arrivals >= count) resolve();
            else hold.listeners.push(check);
          };
          check();
        }),
      release: () => {
        if (this.holds.get(key) === hold) this.holds.delete(key);
        release();
      },
    };
  }

  liveTokenCount(login: string): number {
    return [...this.tokens.values()].filter((r) => r.user.login === login).length;
  }

  private json(res: http.ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { "content-type": "application/json; charset=utf-8" }).end(JSON.stringify(body));
  }

  private async body(req: http.IncomingMessage): Promise<string> {
    let text = "";
    for await (const chunk of req as AsyncIterable<Buffer>) text += chunk.toString();
    return text;
  }

  private appAuthorized(req: http.IncomingMessage): boolean {
    const header = req.headers.authorization ?? "";
    if (!header.startsWith("Basic ")) return false;
    const [id, secret] = Buffer.from(header.slice(6), "base64").toString().split(":");
    return id === this.options.clientId && secret === this.options.clientSecret;
  }

  private bearerUser(req: http.IncomingMessage): TokenRecord | null {
    const header = req.headers.authorization ?? "";
    const token = header.replace(/^(Bearer|token) /i, "");
    const record = this.tokens.get(token);
    if (!record || (record.expiresAt !== null && record.expiresAt <= Date.now())) return null;
    return record;
  }

  private issue(user: EmulatedUser, scope: string): Record<string, unknown> {
    const accessToken = `${this.expiringTokensSeconds ? "ghu" : "gho"}_${randomBytes(18).toString("base64url")}`;
    const expiring = this.expiringTokensSeconds;
    const refreshToken = expiring ? `ghr_${randomBytes(30).toString("base64url")}` : null;
    this.tokens.set(accessToken, { user, scope, expiresAt: expiring ? Date.now() + expiring * 1000 : null, refreshToken });
    if (refreshToken) this.refreshTokens.set(refreshToken, { user, scope });
    return {
      access_token: accessToken,
      token_type: "bearer",
      scope,
      ...(expiring ? { expires_in: expiring, refresh_token: refreshToken, refresh_token_expires_in: 15897600 } : {}),
    };
  }

  private approve(res: http.ServerResponse, login: string, params: URLSearchParams): void {
    const code = randomBytes(10).toString("hex");
    this.codes.set(code, {
      user: this.user(login),
      redirectUri: params.get("redirect_uri") ?? "",
      challenge: params.get("code_challenge"),
      scope: params.get("scope") ?? "",
      expiresAt: Date.now() + 600_000,
    });
    const target = new URL(params.get("redirect_uri") ?? "");
    target.searchParams.set("code", code);
    if (params.get("state")) target.searchParams.set("state", params.get("state")!);
    res.writeHead(302, { location: target.href }).end();
  }

  protected async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", this.url);
    const path = url.pathname;
    const method = req.method ?? "GET";
    let pattern: { readonly name: string; readonly params: string[] } | null = null;
    for (const p of PATTERNS) {
      const m = p.re.exec(path);
      if (m) {
        pattern = { name: p.name, params: m.slice(1).map((v) => decodeURIComponent(v)) };
        break;
      }
    }
    const key = `${method} ${pattern ? pattern.name : path}`;
    this.count1(key);
    const appToken = pattern?.name === "/api/v3/applications/:id/token" ? pattern.params : null;
    if (this.outage === "503") return this.json(res, 503, { message: "Service Unavailable" });
    if (this.outage === "hang") {
      this.hanging.add(res);
      return;
    }
    const hold = this.holds.get(key);
    if (hold) {
      hold.arrivals++;
      for (const listener of hold.listeners.splice(0)) listener();
      await hold.released;
    }
    const failure = this.failures.get(key);
    if (failure !== undefined) return this.fail(res, failure);

    if (path === "/login/oauth/authorize" && method === "GET") {
      const q = url.searchParams;
      if (q.get("client_id") !== this.options.clientId) return this.json(res, 404, { message: "Not Found" });
      if (this.autoApprove) return this.approve(res, this.autoApprove, q);
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(`<!doctype html><html><head><title>Sign in to GitHub emulator</title></head><body>
<h1>Sign in to GitHub emulator</h1>
<form method="post" action="/login/oauth/authorize">
${[...q.entries()].map(([k, v]) => `<input type="hidden" name="${k}" value="${v.replace(/"/g, "&quot;")}">`).join("\n")}
<label for="username">Username</label> <input id="username" name="username" required>
<button type="submit" name="decision" value="authorize">Authorize</button>
<button type="submit" name="decision" value="cancel">Cancel</button>
</form></body></html>`);
      return;
    }
    if (path === "/login/oauth/authorize" && method === "POST") {
      const form = new URLSearchParams(await this.body(req));
      if (form.get("decision") === "cancel") {
        const target = new URL(form.get("redirect_uri") ?? "");
        target.searchParams.set("error", "access_denied");
        target.searchParams.set("error_description", "The user has denied your application access.");
        if (form.get("state")) target.searchParams.set("state", form.get("state")!);
        res.writeHead(302, { location: target.href }).end();
        return;
      }
      return this.approve(res, form.get("username") ?? "octocat", form);
    }
    if (path === "/login/oauth/access_token" && method === "POST") {
      const form = new URLSearchParams(await this.body(req));
      if (form.get("client_id") !== this.options.clientId || form.get("client_secret") !== this.options.clientSecret) {
        return this.json(res, 200, { error: "incorrect_client_credentials", error_description: "The client_id and/or client_secret passed are incorrect." });
      }
      if (form.get("grant_type") === "refresh_token") {
        const record = this.refreshTokens.get(form.get("refresh_token") ?? "");
        if (!record) return this.json(res, 200, { error: "bad_refresh_token", error_description: "The refresh token passed is incorrect or expired." });
        this.refreshTokens.delete(form.get("refresh_token") ?? "");
        return this.json(res, 200, this.issue(record.user, record.scope));
      }
      const code = this.codes.get(form.get("code") ?? "");
      this.codes.delete(form.get("code") ?? "");
      if (!code || code.expiresAt < Date.now())
        return this.json(res, 200, { error: "bad_verification_code", error_description: "The code passed is incorrect or expired." });
      if (form.get("redirect_uri") && form.get("redirect_uri") !== code.redirectUri) {
        return this.json(res, 200, {
          error: "redirect_uri_mismatch",
          error_description: "The redirect_uri MUST match the registered callback URL for this application.",
        });
      }
      if (code.challenge) {
        const verifier = form.get("code_verifier") ?? "";
        if (createHash("sha256").update(verifier).digest("base64url") !== code.challenge) {
          return this.json(res, 200, { error: "bad_verification_code", error_description: "The code_verifier does not match." });
        }
      }
      return this.json(res, 200, this.issue(code.user, code.scope));
    }
    if (path === "/api/v3/user" && method === "GET") {
      const record = this.bearerUser(req);
      if (!record) return this.json(res, 401, { message: "Bad credentials" });
      return this.json(res, 200, {
        id: record.user.id,
        login: record.user.login,
        name: record.user.login,
        email: null,
        avatar_url: null,
        html_url: `${this.url}/${record.user.login}`,
      });
    }
    if (path === "/api/v3/user/emails" && method === "GET") {
      const record = this.bearerUser(req);
      if (!record) return this.json(res, 401, { message: "Bad credentials" });
      // OAuth tokens need `user:email` (or `user`); `read:user` is not enough.
      const scopes = scopesOf(record);
      if (!scopes.includes("user:email") && !scopes.includes("user")) return this.json(res, 404, { message: "Not Found" });
      return this.json(res, 200, this.emailsOf(record.user.login));
    }
    if (path === "/api/v3/user/orgs" && method === "GET") return this.userOrgs(req, res);
    if (pattern && method === "GET") {
      if (pattern.name === "/api/v3/orgs/:org/members/:user") return this.orgMembership(req, res, pattern.params[0]!, pattern.params[1]!);
      if (pattern.name === "/api/v3/orgs/:org/public_members/:user") return this.publicMembership(res, pattern.params[0]!, pattern.params[1]!);
      if (pattern.name === "/api/v3/orgs/:org/teams/:team/memberships/:user")
        return this.teamMembership(req, res, pattern.params[0]!, pattern.params[1]!, pattern.params[2]!);
    }
    if (appToken) {
      if (appToken[0] !== this.options.clientId || !this.appAuthorized(req)) return this.json(res, 404, { message: "Not Found" });
      const body = JSON.parse((await this.body(req)) || "{}") as { access_token?: string };
      const record = this.tokens.get(body.access_token ?? "");
      if (method === "POST") {
        if (!record || (record.expiresAt !== null && record.expiresAt <= Date.now())) return this.json(res, 404, { message: "Not Found" });
        return this.json(res, 200, {
          id: 1,
          token: body.access_token,
          scopes: record.scope.split(/[ ,]+/),
          user: { id: record.user.id, login: record.user.login },
        });
      }
      if (method === "DELETE") {
        if (record) {
          this.tokens.delete(body.access_token ?? "");
          if (record.refreshToken) this.refreshTokens.delete(record.refreshToken);
        }
        res.writeHead(204).end();
        return;
      }
    }
    this.json(res, 404, { message: "Not Found" });
  }

  /** An injected failure, with the body GitHub sends for that status. */
  private async fail(res: http.ServerResponse, status: number): Promise<void> {
    if (status === 401) return this.json(res, 401, { message: "Bad credentials", documentation_url: "https://docs.github.com/rest" });
    if (status === 403 || status === 429) {
      res.writeHead(status, {
        "content-type": "application/json; charset=utf-8",
        "x-ratelimit-limit": "5000",
        "x-ratelimit-remaining": "0",
        "x-ratelimit-reset": String(Math.floor(Date.now() / 1000) + 3600),
      });
      res.end(
        JSON.stringify({
          message: "API rate limit exceeded for user ID 1.",
          documentation_url: "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }),
      );
      return;
    }
    this.json(res, status, { message: status >= 500 ? "Service Unavailable" : "Error" });
  }

  private readsOrgs(record: TokenRecord): boolean {
    return scopesOf(record).some((s) => READ_ORG_SCOPES.includes(s));
  }

  /** 403 for an organization that enforces SAML SSO: the header names where to authorize the token. */
  private async samlRefusal(res: http.ServerResponse, org: OrgRecord): Promise<void> {
    res.writeHead(403, {
      "content-type": "application/json; charset=utf-8",
      "x-github-sso": `required; url=${this.url}/orgs/${org.login}/sso?authorization_request=${randomBytes(12).toString("hex")}`,
    });
    res.end(
      JSON.stringify({
        message: "Resource protected by organization SAML enforcement. You must grant your OAuth token access to this organization.",
        documentation_url: "https://docs.github.com/articles/authenticating-to-a-github-organization-with-saml-single-sign-on/",
      }),
    );
  }

  /**
   * GET /user/orgs ("List organizations for the authenticated user"): OAuth tokens need `user` or
   * `read:org` (write:org and admin:org imply it); with neither GitHub answers 403.
   */
  private async userOrgs(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const record = this.bearerUser(req);
    if (!record) return this.json(res, 401, { message: "Bad credentials" });
    if (!this.readsOrgs(record) && !scopesOf(record).includes("user"))
      return this.json(res, 403, {
        message: "You need at least read:org scope or user scope to list your organizations.",
        documentation_url: "https://docs.github.com/rest/orgs/orgs#list-organizations-for-the-authenticated-user",
      });
    const login = record.user.login;
    const orgs = [...this.orgs.values()].filter((o) => o.members.has(login) && !o.samlSso);
    return this.json(
      res,
      200,
      orgs.map((o) => ({
        login: o.login,
        id: o.id,
        node_id: Buffer.from(`Organization${o.id}`).toString("base64"),
        url: `${this.apiUrl}/orgs/${o.login}`,
        repos_url: `${this.apiUrl}/orgs/${o.login}/repos`,
        events_url: `${this.apiUrl}/orgs/${o.login}/events`,
        hooks_url: `${this.apiUrl}/orgs/${o.login}/hooks`,
        issues_url: `${this.apiUrl}/orgs/${o.login}/issues`,
        members_url: `${this.apiUrl}/orgs/${o.login}/members{/member}`,
        public_members_url: `${this.apiUrl}/orgs/${o.login}/public_members{/member}`,
        avatar_url: `${this.url}/avatars/${o.login}`,
        description: null,
      })),
    );
  }

  /**
   * GET /orgs/{org}/members/{username} ("Check organization membership for a user"): 204 member,
   * 404 not a member — both only when the requester is a member who may see private membership
   * (read:org). Otherwise 302 to the public_members check, which is what GitHub sends a requester
   * it does not see as a member.
   */
  private async orgMembership(req: http.IncomingMessage, res: http.ServerResponse, orgName: string, login: string): Promise<void> {
    const record = this.bearerUser(req);
    if (!record) return this.json(res, 401, { message: "Bad credentials" });
    const org = this.orgs.get(orgName.toLowerCase());
    if (!org) return this.json(res, 404, { message: "Not Found" });
    if (org.samlSso) return this.samlRefusal(res, org);
    if (!this.readsOrgs(record) || !org.members.has(record.user.login)) {
      res.writeHead(302, { location: `${this.apiUrl}/orgs/${encodeURIComponent(org.login)}/public_members/${encodeURIComponent(login)}` }).end();
      return;
    }
    if (org.members.has(login.toLowerCase())) {
      res.writeHead(204).end();
      return;
    }
    return this.json(res, 404, { message: "User does not exist or is not a member of the organization" });
  }

  /** GET /orgs/{org}/public_members/{username}: 204 for a public member, 404 otherwise; no token needed. */
  private async publicMembership(res: http.ServerResponse, orgName: string, login: string): Promise<void> {
    const org = this.orgs.get(orgName.toLowerCase());
    if (org?.members.get(login.toLowerCase())?.public) {
      res.writeHead(204).end();
      return;
    }
    return this.json(res, 404, { message: "Not Found" });
  }

  /**
   * GET /orgs/{org}/teams/{team_slug}/memberships/{username} ("Get team membership for a user"):
   * 200 with `state` active or pending, 404 without a membership. The team must be visible to the
   * requester: a token with read:org of an org member, or of someone invited to that team. Anything
   * else sees 404.
   */
  private async teamMembership(req: http.IncomingMessage, res: http.ServerResponse, orgName: string, slug: string, login: string): Promise<void> {
    const record = this.bearerUser(req);
    if (!record) return this.json(res, 401, { message: "Bad credentials" });
    const org = this.orgs.get(orgName.toLowerCase());
    if (!org) return this.json(res, 404, { message: "Not Found" });
    if (org.samlSso) return this.samlRefusal(res, org);
    const team = org.teams.get(slug.toLowerCase());
    const requester = record.user.login;
    const visible = team !== undefined && this.readsOrgs(record) && (org.members.has(requester) || team.members.has(requester));
    const membership = visible ? team.members.get(login.toLowerCase()) : undefined;
    if (!team || !membership) return this.json(res, 404, { message: "Not Found" });
    return this.json(res, 200, {
      url: `${this.apiUrl}/teams/${team.id}/memberships/${login.toLowerCase()}`,
      role: membership.role,
      state: membership.state,
    });
  }
}

export async function startGitHubEmulator(options: GitHubEmulatorOptions): Promise<GitHubEmulator> {
  return new GitHubEmulator(options).start();
}
