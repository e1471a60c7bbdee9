// The authorization code flow as a client and its user go through it, over real HTTP without a
// browser: register, /authorize, consent, upstream login, callback, /token.
import { randomBytes } from "node:crypto";
import { s256Challenge } from "../../src/grants/pkce.ts";
import { HttpBrowser, answerAs } from "./http-browser.ts";

export interface RegisteredTestClient {
  readonly client_id: string;
  readonly client_secret?: string;
  readonly redirect_uri: string;
}

/** A public client's registration as the tests send it: PKCE, no secret, a code and refresh tokens. */
export function publicClientMetadata(redirect: string, name = "Test client") {
  return {
    client_name: name,
    redirect_uris: [redirect],
    token_endpoint_auth_method: "none",
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
  };
}

export async function registerClient(brokerUrl: string, metadata: Record<string, unknown> = {}): Promise<RegisteredTestClient & Record<string, unknown>> {
  const redirect = (metadata.redirect_uris as string[] | undefined)?.[0] ?? "http://127.0.0.1:7777/callback";
  const res = await fetch(`${brokerUrl}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...publicClientMetadata(redirect), ...metadata }),
  });
  if (res.status !== 201) throw new Error(`registration failed: ${res.status} ${await res.text()}`);
  return { ...((await res.json()) as RegisteredTestClient & Record<string, unknown>), redirect_uri: redirect };
}

export interface AuthorizationResult {
  readonly callback: URL;
  readonly verifier: string;
  readonly state: string;
  readonly browser: HttpBrowser;
}

export async function authorize(
  brokerUrl: string,
  client: RegisteredTestClient,
  options: {
    user?: string;
    decision?: "allow" | "deny";
    upstreamDecision?: "authorize" | "cancel";
    stopAt?: string;
    browser?: HttpBrowser;
    scope?: string;
    resource?: string | null;
    extra?: Record<string, string>;
  } = {},
): Promise<AuthorizationResult> {
  const verifier = randomBytes(32).toString("base64url");
  const state = randomBytes(8).toString("hex");
  const url = new URL(`${brokerUrl}/authorize`);
  const params: Record<string, string> = {
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uri,
    code_challenge: s256Challenge(verifier),
    code_challenge_method: "S256",
    state,
    ...(options.scope ? { scope: options.scope } : {}),
    ...(options.resource === null ? {} : { resource: options.resource ?? `${brokerUrl}/mcp` }),
    ...options.extra,
  };
  for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
  const browser = options.browser ?? new HttpBrowser();
  const callback = await browser.walk(
    url.href,
    options.stopAt ?? client.redirect_uri,
    answerAs(options.user ?? "alice", options.decision ?? "allow", options.upstreamDecision),
  );
  return { callback, verifier, state, browser };
}

export async function tokenRequest(
  brokerUrl: string,
  form: Record<string, string>,
  auth?: { id: string; secret: string },
): Promise<{ status: number; body: Record<string, unknown>; headers: Headers }> {
  const res = await fetch(`${brokerUrl}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      ...(auth ? { authorization: `Basic ${Buffer.from(`${encodeURIComponent(auth.id)}:${encodeURIComponent(auth.secret)}`).toString("base64")}` } : {}),
    },
    body: new URLSearchParams(form).toString(),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as Record<string, unknown>) : {}, headers: res.headers };
}

/**
 * Redeems the code `authorization` brought back for `client` at /token (a confidential client
 * authenticates with client_secret_basic), for `resource` (default PUBLIC_URL/mcp). The answer as
 * it came, for the test to judge.
 */
export async function redeemCode(
  brokerUrl: string,
  client: RegisteredTestClient,
  authorization: { readonly callback: URL; readonly verifier: string },
  resource = `${brokerUrl}/mcp`,
): ReturnType<typeof tokenRequest> {
  const code = authorization.callback.searchParams.get("code");
  if (!code) throw new Error(`no code: ${authorization.callback.href}`);
  const confidential = client.client_secret ? { id: client.client_id, secret: client.client_secret } : undefined;
  return tokenRequest(
    brokerUrl,
    {
      grant_type: "authorization_code",
      code,
      redirect_uri: client.redirect_uri,
      code_verifier: authorization.verifier,
      ...(confidential ? {} : { client_id: client.client_id }),
      resource,
    },
    confidential,
  );
}

/** The whole flow: a fresh public client, a login as `user`, and the token response. */
/** `resource`: the server's URL (default PUBLIC_URL/mcp); `scope`: what the client asks for (default: nothing named). */
export async function obtainTokens(brokerUrl: string, options: { user?: string; client?: RegisteredTestClient; resource?: string; scope?: string } = {}) {
  const client = options.client ?? (await registerClient(brokerUrl));
  const resource = options.resource ?? `${brokerUrl}/mcp`;
  const authorization = await authorize(brokerUrl, client, { user: options.user, resource, ...(options.scope ? { scope: options.scope } : {}) });
  const token = await redeemCode(brokerUrl, client, authorization, resource);
  if (token.status !== 200) throw new Error(`token request failed: ${JSON.stringify(token.body)}`);
  return { client, tokens: token.body as { access_token: string; refresh_token: string; expires_in: number; scope: string } };
}
