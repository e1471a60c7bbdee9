// A GitHub emulator that speaks GitHub's real OAuth and REST endpoints, as GitHub Enterprise
// Server lays them out on one origin: /login/oauth/* for OAuth, /api/v3/* for the API. It
// supports OAuth apps and GitHub Apps with expiring user tokens, and has controls for tests:
// revoke a user's tokens, expire them now, an outage (503 or hang), and call counters.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createHash, randomBytes } from "node:crypto";

export interface EmulatedUser {
  readonly id: number;
  readonly login: string;
  readonly email: string;
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

export class GitHubEmulator {
  url = "";
  /** Calls per "METHOD path-pattern", e.g. "POST /api/v3/applications/:id/token". */
  readonly calls = new Map<string, number>();
  /** When set, /login/oauth/authorize approves at once as this user (tests without a browser). */
  autoApprove: string | null = null;
  /** "503": every request fails; "hang": requests never get an answer. */
  outage: null | "503" | "hang" = null;
  expiringTokensSeconds: number | undefined;

  private server!: http.Server;
  private readonly codes = new Map<string, CodeRecord>();
  private readonly tokens = new Map<string, TokenRecord>();
  private readonly refreshTokens = new Map<string, { user: EmulatedUser; scope: string }>();
  private readonly hanging = new Set<http.ServerResponse>();
  private nextId = 1000;
  private readonly users = new Map<string, EmulatedUser>();

  constructor(private readonly options: GitHubEmulatorOptions) {
    this.expiringTokensSeconds = options.expiringTokensSeconds;
  }

  get apiUrl(): string {
    return `${this.url}/api/v3`;
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

  liveTokenCount(login: string): number {
    return [...this.tokens.values()].filter((r) => r.user.login === login).length;
  }

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      this.route(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  private count1(key: string): void {
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
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

  private async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", this.url);
    const path = url.pathname;
    const method = req.method ?? "GET";
    const appToken = /^\/api\/v3\/applications\/([^/]+)\/token$/.exec(path);
    this.count1(`${method} ${appToken ? "/api/v3/applications/:id/token" : path}`);
    if (this.outage === "503") return this.json(res, 503, { message: "Service Unavailable" });
    if (this.outage === "hang") {
      this.hanging.add(res);
      return;
    }

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
      if (!/\buser(:email)?\b/.test(record.scope)) return this.json(res, 404, { message: "Not Found" });
      return this.json(res, 200, [{ email: record.user.email, primary: true, verified: true, visibility: "private" }]);
    }
    if (appToken) {
      if (appToken[1] !== this.options.clientId || !this.appAuthorized(req)) return this.json(res, 404, { message: "Not Found" });
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
}

export async function startGitHubEmulator(options: GitHubEmulatorOptions): Promise<GitHubEmulator> {
  return new GitHubEmulator(options).start();
}
