// A plain OAuth 2.0 authorization server (no OpenID Connect, no discovery), as the services users
// connect their accounts at run one: /authorize (authorization code, PKCE S256 required),
// /token (authorization_code, refresh_token with rotation; client_secret_basic and
// client_secret_post), /revoke (RFC 7009) and /userinfo ({ id, login, email }). Controls for
// tests: who approves (`nextUser`, or a page with one link per user for a browser), revoke or
// expire a user's tokens, an outage (503 or hang), and call counters.
import type http from "node:http";
import { EmulatorServer } from "./emulator-server.ts";
import { createHash, randomBytes } from "node:crypto";

export interface OAuth2EmulatedUser {
  readonly id: string;
  readonly login: string;
  readonly email: string;
}

export type OAuth2ClientAuth = "client_secret_basic" | "client_secret_post";

export interface OAuth2EmulatorOptions {
  readonly clientId: string;
  readonly clientSecret: string;
  /** The registered redirect URIs: /authorize refuses any other, exactly compared. */
  readonly redirectUris: readonly string[];
  /** Lifetime of access tokens (default 3600 s). */
  readonly accessTtlSeconds?: number;
  /** Client authentications the token and revocation endpoints accept (default both). */
  readonly clientAuth?: readonly OAuth2ClientAuth[];
  /** Users shown on the approval page (more are made by `user(login)`); default alice and bob. */
  readonly users?: readonly string[];
}

interface Grant {
  readonly id: string;
  readonly user: OAuth2EmulatedUser;
  readonly scope: string;
}

interface CodeRecord {
  readonly grant: Grant;
  readonly redirectUri: string;
  readonly challenge: string;
  readonly expiresAt: number;
}

interface AccessRecord {
  readonly grant: Grant;
  expiresAt: number;
}

/** An answer a test makes an endpoint give instead of its own (a server that breaks the rules, or follows other ones). */
export interface CannedAnswer {
  readonly status: number;
  readonly body?: string;
  readonly contentType?: string;
}

/** Calls are counted as "authorize", "token:authorization_code", "token:refresh_token", "revoke", "userinfo". */
export type OAuth2EmulatorCall = "authorize" | `token:${string}` | "revoke" | "userinfo";

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** RFC 6749 §2.3.1: each part of the Basic credentials is form-urlencoded. */
const formDecode = (s: string): string => decodeURIComponent(s.replace(/\+/g, " "));

export class OAuth2Emulator extends EmulatorServer {
  /** When set, /authorize approves at once as this user (tests without a browser). */
  nextUser: string | null = null;
  /** "503": every request fails; "hang": requests never get an answer. */
  outage: null | "503" | "hang" = null;
  /** Whether token answers carry `scope` (RFC 6749 §5.1 lets a server leave it out when it granted what was asked). */
  scopeInAnswers = true;
  /** Whether a refresh spends the refresh token and answers a new one (false: the old one stays, none is sent). */
  rotateRefreshTokens = true;
  accessTtlSeconds: number;

  private nextId = 1;
  private readonly users = new Map<string, OAuth2EmulatedUser>();
  private readonly codes = new Map<string, CodeRecord>();
  private readonly accessTokens = new Map<string, AccessRecord>();
  private readonly refreshTokens = new Map<string, Grant>();
  private readonly answers = new Map<string, CannedAnswer>();

  constructor(private readonly options: OAuth2EmulatorOptions) {
    super();
    this.accessTtlSeconds = options.accessTtlSeconds ?? 3600;
    for (const login of options.users ?? ["alice", "bob"]) this.user(login);
  }

  get authorizeUrl(): string {
    return `${this.url}/authorize`;
  }
  get tokenUrl(): string {
    return `${this.url}/token`;
  }
  get revokeUrl(): string {
    return `${this.url}/revoke`;
  }
  get userinfoUrl(): string {
    return `${this.url}/userinfo`;
  }

  /** The user with this login (made on first use, with a numeric-looking id and an e-mail). */
  user(login: string): OAuth2EmulatedUser {
    const key = login.toLowerCase();
    let u = this.users.get(key);
    if (!u) {
      u = { id: `u-${this.nextId++}`, login: key, email: `${key}@oauth2.example` };
      this.users.set(key, u);
    }
    return u;
  }

  count(key: OAuth2EmulatorCall): number {
    return this.calls.get(key) ?? 0;
  }

  /** Ends every token of a user, as "revoke access" in a service's settings does. */
  revokeUser(login: string): void {
    for (const [t, r] of this.accessTokens) if (r.grant.user.login === login) this.accessTokens.delete(t);
    for (const [t, g] of this.refreshTokens) if (g.user.login === login) this.refreshTokens.delete(t);
  }

  /** Makes every access token of a user expired now (refresh tokens stay valid). */
  expireUser(login: string): void {
    for (const r of this.accessTokens.values()) if (r.grant.user.login === login) r.expiresAt = Date.now() - 1000;
  }

  /** Makes every request to `path` ("/token", "/revoke", "/userinfo") get `answer` (still counted); null ends it. */
  answerWith(path: string, answer: CannedAnswer | null): void {
    if (answer) this.answers.set(path, answer);
    else this.answers.delete(path);
  }

  /** Access and refresh tokens of a user the emulator still honours. */
  liveTokenCount(login: string): number {
    const now = Date.now();
    return (
      [...this.accessTokens.values()].filter((r) => r.grant.user.login === login && r.expiresAt > now).length +
      [...this.refreshTokens.values()].filter((g) => g.user.login === login).length
    );
  }

  private json(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
    res.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", ...headers }).end(JSON.stringify(body));
  }

  private async body(req: http.IncomingMessage): Promise<URLSearchParams> {
    let text = "";
    for await (const chunk of req as AsyncIterable<Buffer>) text += chunk.toString();
    return new URLSearchParams(text);
  }

  /** The client's authentication (RFC 6749 §2.3.1): exactly one accepted method with the right id and secret. */
  private authenticate(req: http.IncomingMessage, form: URLSearchParams): "ok" | "invalid_client" | "invalid_request" {
    const accepted = this.options.clientAuth ?? ["client_secret_basic", "client_secret_post"];
    const header = req.headers.authorization;
    const inBody = form.has("client_secret");
    if (header && inBody) return "invalid_request"; // §2.3: never more than one method
    let id: string | undefined;
    let secret: string | undefined;
    if (header?.startsWith("Basic ") && accepted.includes("client_secret_basic")) {
      const decoded = Buffer.from(header.slice(6), "base64").toString();
      const i = decoded.indexOf(":");
      if (i < 0) return "invalid_client";
      id = formDecode(decoded.slice(0, i));
      secret = formDecode(decoded.slice(i + 1));
    } else if (inBody && !header && accepted.includes("client_secret_post")) {
      id = form.get("client_id") ?? undefined;
      secret = form.get("client_secret") ?? undefined;
    }
    return id === this.options.clientId && secret === this.options.clientSecret ? "ok" : "invalid_client";
  }

  private async refuseClient(req: http.IncomingMessage, res: http.ServerResponse, outcome: "invalid_client" | "invalid_request"): Promise<void> {
    if (outcome === "invalid_request") return this.json(res, 400, { error: "invalid_request", error_description: "more than one client authentication" });
    // RFC 6749 §5.2: 401 with a challenge when the client tried the Authorization header.
    return this.json(
      res,
      401,
      { error: "invalid_client", error_description: "client authentication failed" },
      req.headers.authorization ? { "www-authenticate": 'Basic realm="oauth2-emulator"' } : {},
    );
  }

  private issue(grant: Grant, withRefresh: boolean): Record<string, unknown> {
    const accessToken = `at_${randomBytes(24).toString("base64url")}`;
    this.accessTokens.set(accessToken, { grant, expiresAt: Date.now() + this.accessTtlSeconds * 1000 });
    let refreshToken: string | undefined;
    if (withRefresh) {
      refreshToken = `rt_${randomBytes(24).toString("base64url")}`;
      this.refreshTokens.set(refreshToken, grant);
    }
    return {
      access_token: accessToken,
      token_type: "Bearer",
      expires_in: this.accessTtlSeconds,
      ...(refreshToken ? { refresh_token: refreshToken } : {}),
      ...(this.scopeInAnswers && grant.scope ? { scope: grant.scope } : {}),
    };
  }

  protected async route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", this.url);
    const method = req.method ?? "GET";
    if (this.outage === "503") return this.json(res, 503, { error: "temporarily_unavailable" });
    if (this.outage === "hang") {
      this.hanging.add(res);
      return;
    }
    const canned = this.answers.get(url.pathname);
    if (canned) {
      if (url.pathname === "/token") this.count1(`token:${(await this.body(req)).get("grant_type") ?? ""}`);
      else this.count1(url.pathname.slice(1));
      res.writeHead(canned.status, canned.contentType ? { "content-type": canned.contentType } : {}).end(canned.body ?? "");
      return;
    }
    if (url.pathname === "/authorize" && method === "GET") {
      this.count1("authorize");
      return this.authorize(res, url.searchParams);
    }
    if (url.pathname === "/token" && method === "POST") {
      const form = await this.body(req);
      this.count1(`token:${form.get("grant_type") ?? ""}`);
      return this.token(req, res, form);
    }
    if (url.pathname === "/revoke" && method === "POST") {
      this.count1("revoke");
      const form = await this.body(req);
      const auth = this.authenticate(req, form);
      if (auth !== "ok") return this.refuseClient(req, res, auth);
      const token = form.get("token");
      if (!token) return this.json(res, 400, { error: "invalid_request", error_description: "token is required" });
      // RFC 7009 §2.1: a refresh token's revocation ends the access tokens of its grant too; an
      // unknown token is answered 200 like a known one (§2.2).
      const grant = this.refreshTokens.get(token) ?? this.accessTokens.get(token)?.grant;
      if (this.refreshTokens.delete(token) && grant) for (const [t, r] of this.accessTokens) if (r.grant.id === grant.id) this.accessTokens.delete(t);
      this.accessTokens.delete(token);
      res.writeHead(200).end();
      return;
    }
    if (url.pathname === "/userinfo" && method === "GET") {
      this.count1("userinfo");
      const token = /^Bearer (.+)$/i.exec(req.headers.authorization ?? "")?.[1] ?? "";
      const record = this.accessTokens.get(token);
      if (!record || record.expiresAt <= Date.now())
        return this.json(res, 401, { error: "invalid_token" }, { "www-authenticate": 'Bearer error="invalid_token"' });
      const { id, login, email } = record.grant.user;
      return this.json(res, 200, { id, login, email });
    }
    this.json(res, 404, { error: "not_found" });
  }

  /** RFC 6749 §4.1.1 with PKCE required; errors about the client or redirect URI are shown, not redirected (§4.1.2.1). */
  private async authorize(res: http.ServerResponse, q: URLSearchParams): Promise<void> {
    const page = (status: number, message: string): void => {
      res.writeHead(status, { "content-type": "text/html; charset=utf-8" }).end(`<!doctype html><title>OAuth 2 emulator</title><p>${escapeHtml(message)}</p>`);
    };
    if (q.get("client_id") !== this.options.clientId) return page(400, "unknown client_id");
    const redirectUri = q.get("redirect_uri") ?? "";
    if (!this.options.redirectUris.includes(redirectUri)) return page(400, "redirect_uri is not registered for this client");
    const back = (params: Record<string, string>) => {
      const target = new URL(redirectUri);
      for (const [k, v] of Object.entries(params)) target.searchParams.set(k, v);
      if (q.get("state")) target.searchParams.set("state", q.get("state")!);
      res.writeHead(302, { location: target.href }).end();
    };
    if (q.get("response_type") !== "code") return back({ error: "unsupported_response_type" });
    const challenge = q.get("code_challenge");
    if (!challenge || q.get("code_challenge_method") !== "S256") return back({ error: "invalid_request", error_description: "PKCE with S256 is required" });
    const login = q.get("login") ?? this.nextUser;
    if (q.get("deny")) return back({ error: "access_denied", error_description: "the user denied the request" });
    if (!login) {
      // The approval page for a browser: one link per user (the same request, plus login=…), one to deny.
      const link = (name: string, value: string, label: string) => {
        const href = new URLSearchParams(q);
        href.set(name, value);
        return `<li><a href="/authorize?${escapeHtml(href.toString())}">${escapeHtml(label)}</a></li>`;
      };
      const links = [...this.users.values()].map((u) => link("login", u.login, `Continue as ${u.login}`));
      res
        .writeHead(200, { "content-type": "text/html; charset=utf-8" })
        .end(`<!doctype html><html><head><title>Authorize with OAuth 2 emulator</title></head><body>
<h1>Authorize ${escapeHtml(this.options.clientId)}</h1><ul>
${links.join("\n")}
${link("deny", "1", "Deny")}
</ul></body></html>`);
      return;
    }
    const code = randomBytes(16).toString("base64url");
    this.codes.set(code, {
      grant: { id: randomBytes(8).toString("hex"), user: this.user(login), scope: q.get("scope") ?? "" },
      redirectUri,
      challenge,
      expiresAt: Date.now() + 600_000,
    });
    back({ code });
  }

  private async token(req: http.IncomingMessage, res: http.ServerResponse, form: URLSearchParams): Promise<void> {
    const auth = this.authenticate(req, form);
    if (auth !== "ok") return this.refuseClient(req, res, auth);
    const grantType = form.get("grant_type");
    if (grantType === "authorization_code") {
      const code = this.codes.get(form.get("code") ?? "");
      this.codes.delete(form.get("code") ?? "");
      if (!code || code.expiresAt < Date.now()) return this.json(res, 400, { error: "invalid_grant", error_description: "unknown or expired code" });
      if (form.get("redirect_uri") !== code.redirectUri)
        return this.json(res, 400, { error: "invalid_grant", error_description: "redirect_uri does not match" });
      const verifier = form.get("code_verifier") ?? "";
      if (createHash("sha256").update(verifier, "ascii").digest("base64url") !== code.challenge)
        return this.json(res, 400, { error: "invalid_grant", error_description: "code_verifier does not match the code_challenge" });
      return this.json(res, 200, this.issue(code.grant, true));
    }
    if (grantType === "refresh_token") {
      const refreshToken = form.get("refresh_token") ?? "";
      const grant = this.refreshTokens.get(refreshToken);
      if (!grant) return this.json(res, 400, { error: "invalid_grant", error_description: "unknown or revoked refresh token" });
      // Rotation: the old refresh token is spent.
      if (this.rotateRefreshTokens) this.refreshTokens.delete(refreshToken);
      return this.json(res, 200, this.issue(grant, this.rotateRefreshTokens));
    }
    return this.json(res, 400, { error: "unsupported_grant_type" });
  }
}

export async function startOAuth2Emulator(options: OAuth2EmulatorOptions): Promise<OAuth2Emulator> {
  return new OAuth2Emulator(options).start();
}
