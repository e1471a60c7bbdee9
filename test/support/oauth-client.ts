// Low-level helpers for the authorization server tests: raw requests (so tests see the status,
// headers and body of every failure), PKCE pairs, /authorize URLs, the consent page, and row
// counts of every table. The whole flow as a client walks it is in oauth-flow.ts.
import { randomBytes } from "node:crypto";
import { s256Challenge } from "../../src/grants/pkce.ts";
import type { Db } from "../../src/store/db.ts";
import { ClientRegistry } from "../../src/grants/clients.ts";
import { parseClientMetadata } from "../../src/grants/client-metadata.ts";
import { clientMetadataResponse } from "../../src/oauth/register.ts";
import { HttpBrowser } from "./http-browser.ts";
import { authorize, type RegisteredTestClient } from "./oauth-flow.ts";

export interface HttpResult {
  readonly status: number;
  readonly headers: Headers;
  readonly text: string;
  /** The body as JSON, or undefined when it is not JSON. */
  readonly json: Record<string, unknown> | undefined;
}

async function toResult(res: Response): Promise<HttpResult> {
  const text = await res.text();
  let json: Record<string, unknown> | undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === "object") json = parsed as Record<string, unknown>;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

export async function send(url: string, init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<HttpResult> {
  return toResult(await fetch(url, { method: init.method ?? "GET", redirect: "manual", headers: init.headers, body: init.body }));
}

/** POST application/x-www-form-urlencoded; a string body is sent as is (for duplicated parameters). */
export async function postForm(url: string, form: Record<string, string> | string, headers: Record<string, string> = {}): Promise<HttpResult> {
  const body = typeof form === "string" ? form : new URLSearchParams(form).toString();
  return send(url, { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded", ...headers }, body });
}

/** POST application/json; a string body is sent as is (for broken JSON). */
export async function postJson(url: string, body: unknown, headers: Record<string, string> = {}): Promise<HttpResult> {
  return send(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** HTTP Basic credentials as RFC 6749 §2.3.1 wants them: each part form-urlencoded first. */
export function basicAuth(id: string, secret: string): string {
  const enc = (v: string) => encodeURIComponent(v).replace(/%20/g, "+");
  return `Basic ${Buffer.from(`${enc(id)}:${enc(secret)}`).toString("base64")}`;
}

/** How `client` authenticates at /token, /revoke and /introspect, by its registered method. */
export function clientAuth(client: { client_id: string; client_secret?: string; token_endpoint_auth_method?: unknown }): {
  headers: Record<string, string>;
  form: Record<string, string>;
} {
  switch (client.token_endpoint_auth_method) {
    case "client_secret_basic":
      return { headers: { authorization: basicAuth(client.client_id, client.client_secret!) }, form: {} };
    case "client_secret_post":
      return { headers: {}, form: { client_id: client.client_id, client_secret: client.client_secret! } };
    default:
      return { headers: {}, form: { client_id: client.client_id } };
  }
}

/** The same string with its last character changed (a near miss that is never equal by chance). */
export function tamper(value: string): string {
  const last = value.at(-1);
  return `${value.slice(0, -1)}${last === "A" ? "B" : "A"}`;
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: s256Challenge(verifier) };
}

let ipCounter = 0;
/**
 * A fresh client address for X-Forwarded-For. Brokers started with TRUST_PROXY=true count
 * registrations per forwarded address, so tests that register many clients stay under the limit.
 */
export function freshIp(): string {
  ipCounter++;
  return `10.${(process.pid >> 8) & 255}.${(ipCounter >> 8) & 255}.${ipCounter & 255}`;
}

export type TestClient = RegisteredTestClient & Record<string, unknown>;

/**
 * Registers a client at /register (from a fresh forwarded address) and returns the registration
 * response; a public loopback client with the authorization_code and refresh_token grants unless
 * `metadata` says otherwise.
 */
export async function registerTestClient(brokerUrl: string, metadata: Record<string, unknown> = {}): Promise<TestClient> {
  const body = {
    client_name: "Test client",
    redirect_uris: ["http://127.0.0.1:7777/callback"],
    token_endpoint_auth_method: "none",
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    ...metadata,
  };
  const res = await postJson(`${brokerUrl}/register`, body, { "x-forwarded-for": freshIp() });
  if (res.status !== 201 || !res.json) throw new Error(`registration failed: ${res.status} ${res.text}`);
  const redirectUris = (res.json.redirect_uris as string[] | undefined) ?? [];
  return { ...(res.json as unknown as RegisteredTestClient), ...res.json, redirect_uri: redirectUris[0] ?? "" };
}

/**
 * Registers a client as the operator does (`clients add`: the same metadata rules, origin
 * "manual") on a running broker's database, and returns it in the shape of a registration
 * response. Machine clients (client_credentials) can only come to exist this way.
 */
export async function registerOperatorClient(db: Db, metadata: Record<string, unknown> = {}): Promise<TestClient> {
  const body = {
    client_name: "Operator client",
    token_endpoint_auth_method: "client_secret_basic",
    grant_types: ["client_credentials"],
    response_types: [],
    ...metadata,
  };
  const { client, clientSecret } = await new ClientRegistry(db).register(parseClientMetadata(body, "manual"), "manual");
  const response = clientMetadataResponse(client, clientSecret);
  return { ...(response as unknown as RegisteredTestClient), ...response, redirect_uri: client.redirectUris[0] ?? "" };
}

/**
 * An /authorize URL with valid parameters for `client`, then `overrides` applied (a value of
 * undefined removes the parameter).
 */
export function authorizeUrl(
  brokerUrl: string,
  client: { client_id: string; redirect_uri: string },
  overrides: Record<string, string | undefined> = {},
  challenge = pkcePair().challenge,
): URL {
  const params: Record<string, string | undefined> = {
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uri,
    code_challenge: challenge,
    code_challenge_method: "S256",
    state: "st-123",
    resource: `${brokerUrl}/mcp`,
    ...overrides,
  };
  const url = new URL(`${brokerUrl}/authorize`);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url;
}

/**
 * The browser session id in `browser`'s session cookie for the broker at `brokerUrl` (the cookie
 * is koa-session's base64 JSON, signed beside it), or null without one. A sign-in changes it.
 */
export function browserSessionIdOf(browser: HttpBrowser, brokerUrl: string): string | null {
  const value = browser.cookies(brokerUrl).mab_session;
  if (!value) return null;
  const data = JSON.parse(Buffer.from(value, "base64").toString("utf8")) as { sid?: unknown };
  return typeof data.sid === "string" ? data.sid : null;
}

/** The parameters of a redirect's Location (an error or success redirect to the client). */
export function redirectParams(res: HttpResult | Response, base?: string): { url: URL; params: Record<string, string> } {
  const location = res.headers.get("location");
  if (!location) throw new Error(`no Location header (status ${res.status})`);
  const url = new URL(location, base);
  return { url, params: Object.fromEntries(url.searchParams) };
}

export interface ConsentForm {
  readonly browser: HttpBrowser;
  /** The consent page URL (with ?transaction=…). */
  readonly pageUrl: string;
  readonly html: string;
  readonly transaction: string;
  readonly csrf: string;
  readonly headers: Headers;
}

function hiddenValue(html: string, name: string): string {
  const m = new RegExp(`<input type="hidden" name="${name}" value="([^"]*)"`).exec(html);
  if (!m) throw new Error(`no hidden input ${name} in the page`);
  return m[1]!;
}

/** What a page says, without its markup and styles: what a failed expectation should show. */
function pageText(html: string): string {
  const body = html.replace(/<(style|script)[^>]*>[\s\S]*?<\/\1>/g, " ").replace(/<[^>]+>/g, " ");
  return body.replace(/\s+/g, " ").trim().slice(0, 600);
}

/** Opens the consent page in `browser`: GET an /authorize URL, follow to /consent, read the form. */
export async function openConsent(authorize: URL, browser = new HttpBrowser()): Promise<ConsentForm> {
  const first = await browser.request(authorize.href);
  const location = first.headers.get("location");
  if (first.status !== 302 || !location?.includes("/consent?"))
    throw new Error(`expected a redirect to the consent page, got ${first.status} ${location ?? pageText(await first.text())}`);
  const pageUrl = new URL(location, authorize).href;
  return readConsent(pageUrl, browser);
}

/** GETs a consent page URL in `browser` and reads its form. */
export async function readConsent(pageUrl: string, browser: HttpBrowser): Promise<ConsentForm> {
  const res = await browser.request(pageUrl);
  const html = await res.text();
  if (res.status !== 200) throw new Error(`consent page answered ${res.status}: ${html.slice(0, 300)}`);
  return { browser, pageUrl, html, transaction: hiddenValue(html, "transaction"), csrf: hiddenValue(html, "csrf"), headers: res.headers };
}

/** Posts the consent form (as `browser`, possibly another one than the page's). */
export async function decide(form: { pageUrl: string; transaction: string; csrf: string }, decision: string, browser: HttpBrowser): Promise<Response> {
  return browser.request(new URL("consent", form.pageUrl).href, { form: { transaction: form.transaction, csrf: form.csrf, decision } });
}

export const TABLES = [
  "client",
  "authTransaction",
  "consent",
  "upstreamSession",
  "grant",
  "authorizationCode",
  "accessToken",
  "refreshToken",
  "auditEvent",
] as const;

/** Every count in one statement: the malformed-request table takes it twice per row, on both databases. */
const COUNT_ROWS = `SELECT ${TABLES.map((t) => `(SELECT COUNT(*) FROM "${t[0]!.toUpperCase()}${t.slice(1)}") AS "${t}"`).join(", ")}`;

/** Row counts of every table, to show that a request changed nothing. */
export async function countRows(db: Db): Promise<Record<(typeof TABLES)[number], number>> {
  const [row] = await db.$queryRawUnsafe<Array<Record<(typeof TABLES)[number], number | bigint>>>(COUNT_ROWS);
  // PostgreSQL's COUNT is a bigint.
  return Object.fromEntries(TABLES.map((t) => [t, Number(row![t])])) as Record<(typeof TABLES)[number], number>;
}

/** One client of each kind the endpoint tests need, on one broker. */
export interface ClientSet {
  /** Self-registered public client (PKCE, loopback redirect). */
  readonly pub: TestClient;
  /** Operator-registered confidential client (client_secret_basic) with every grant. */
  readonly basic: TestClient;
  /** Self-registered confidential client authenticating with client_secret_post. */
  readonly post: TestClient;
  /** Operator-registered machine client: client_credentials only. */
  readonly machine: TestClient;
}

export async function registerClientSet(brokerUrl: string, db: Db): Promise<ClientSet> {
  const [pub, basic, post, machine] = await Promise.all([
    registerTestClient(brokerUrl),
    registerOperatorClient(db, {
      redirect_uris: ["http://127.0.0.1:7777/callback"],
      grant_types: ["authorization_code", "refresh_token", "client_credentials"],
      response_types: ["code"],
    }),
    registerTestClient(brokerUrl, { token_endpoint_auth_method: "client_secret_post" }),
    registerOperatorClient(db),
  ]);
  return { pub, basic, post, machine };
}

/** A token response's two tokens. */
export type TokenPair = { access_token: string; refresh_token: string };

/**
 * Tokens for `client` from the broker at `brokerUrl` through the whole flow (login as `user`), the
 * code redeemed with the client's own authentication method.
 */
export async function tokensThroughFlow(brokerUrl: string, client: TestClient, user = "alice"): Promise<TokenPair> {
  const { callback, verifier } = await authorize(brokerUrl, client, { user });
  const auth = clientAuth(client);
  const form = {
    grant_type: "authorization_code",
    code: callback.searchParams.get("code")!,
    code_verifier: verifier,
    redirect_uri: client.redirect_uri,
    ...auth.form,
  };
  const res = await postForm(`${brokerUrl}/token`, form, auth.headers);
  if (res.status !== 200) throw new Error(`token request failed: ${res.text}`);
  return res.json as TokenPair;
}
