// A table of malformed requests to /register, /authorize, /token, /revoke,
// /introspect, /consent and /oauth/callback, run on SQLite and PostgreSQL. None may cause a 5xx;
// the protocol endpoints answer OAuth error JSON, browser pages a page or an error redirect to the
// registered URI; and the database stays exactly as it was.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { databaseTargets, type DatabaseTarget } from "../support/database-targets.ts";
import { authorizeUrl, basicAuth, countRows, freshIp, registerClientSet, send, type HttpResult, type TestClient } from "../support/oauth-client.ts";
import { JWT_BEARER, assertionClaims, unsigned } from "../support/client-assertion.ts";

let t: TestBroker;
let pub: TestClient;
let basic: TestClient;
let post: TestClient;
let cleanup: () => Promise<void>;
async function setUp(target: DatabaseTarget): Promise<void> {
  const database = await target.setup();
  cleanup = database.cleanup;
  t = await startBroker({ TRUST_PROXY: "true", DATABASE_URL: database.url });
  ({ pub, basic, post } = await registerClientSet(t.url, t.broker.database.db));
}

/** json: OAuth error JSON; page: an HTML error page, no redirect; redirect: an error sent to the registered URI; any: no 5xx. */
type Expect = "json" | "page" | "redirect" | "any";
interface Case {
  readonly name: string;
  readonly expect: Expect;
  /** The OAuth error code the answer must carry (json and redirect rows). */
  readonly code?: string;
  readonly request: () => { method?: string; path: string; headers?: Record<string, string>; body?: string | Buffer };
}

const FORM = "application/x-www-form-urlencoded";
const SAML = "urn:ietf:params:oauth:client-assertion-type:saml2-bearer";
/** The form fields of a client assertion (private_key_jwt). */
const assertion = (value: string, type = JWT_BEARER) => ({ client_assertion_type: type, client_assertion: value });
/** An assertion naming `clientId` with no signature at all (alg none). */
const unsignedFor = (clientId: string) => unsigned(assertionClaims(clientId, `${t.url}/token`));
const JSON_TYPE = "application/json";
const big = (n: number) => "a".repeat(n);
const goodUri = "https://app.example.com/cb";
const cases: Case[] = [];
type Make = () => { method?: string; headers?: Record<string, string>; body?: string | Buffer; path?: string };
/** Rows answered with a page, or anything but a 5xx. */
const add = (endpoint: string, expect: "page" | "any", rows: [string, Make][]) => {
  for (const [name, make] of rows) cases.push({ name: `${endpoint}: ${name}`, expect, request: () => ({ method: "POST", path: endpoint, ...make() }) });
};
/** Rows answered with an OAuth error, each with the code it must carry. */
const addWithCode = (endpoint: string, expect: "json" | "redirect", rows: [string, string, Make][]) => {
  for (const [name, code, make] of rows)
    cases.push({ name: `${endpoint}: ${name}`, expect, code, request: () => ({ method: "POST", path: endpoint, ...make() }) });
};

// ---------- /register (RFC 7591: JSON in, JSON errors out) ----------
const ct = (type: string): Record<string, string> => (type ? { "content-type": type } : {});
const reg = (body: unknown, type = JSON_TYPE) => ({
  headers: { ...ct(type), "x-forwarded-for": freshIp() },
  body: typeof body === "string" ? body : JSON.stringify(body),
});
addWithCode("/register", "json", [
  ["text/plain with a valid document", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri] }, "text/plain")],
  ["form-encoded", "invalid_client_metadata", () => reg("redirect_uris=https%3A%2F%2Fapp.example.com%2Fcb", FORM)],
  ["no content type", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri] }, "")],
  ["multipart", "invalid_client_metadata", () => reg("--x\r\nContent-Disposition: form-data; name=a\r\n\r\nb\r\n--x--", "multipart/form-data; boundary=x")],
  ["truncated JSON", "invalid_client_metadata", () => reg('{"redirect_uris": [')],
  ["an empty body", "invalid_client_metadata", () => reg("")],
  ["null", "invalid_client_metadata", () => reg("null")],
  ["an array", "invalid_client_metadata", () => reg("[]")],
  ["a string", "invalid_client_metadata", () => reg('"hello"')],
  ["a number", "invalid_client_metadata", () => reg("123")],
  ["redirect_uris as a string", "invalid_redirect_uri", () => reg({ redirect_uris: goodUri })],
  ["redirect_uris with a number", "invalid_redirect_uri", () => reg({ redirect_uris: [123] })],
  ["a plain-http redirect URI", "invalid_redirect_uri", () => reg({ redirect_uris: ["http://evil.example/cb"] })],
  ["a redirect URI with a fragment", "invalid_redirect_uri", () => reg({ redirect_uris: [`${goodUri}#f`] })],
  ["no redirect URIs for a code client", "invalid_redirect_uri", () => reg({ redirect_uris: [], token_endpoint_auth_method: "none" })],
  ["grant type password", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], grant_types: ["password"] })],
  ["client_credentials for a public client", "invalid_client_metadata", () => reg({ token_endpoint_auth_method: "none", grant_types: ["client_credentials"] })],
  ["response type token", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], response_types: ["token"] })],
  ["auth method tls_client_auth", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], token_endpoint_auth_method: "tls_client_auth" })],
  ["a 201-character client_name", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], client_name: big(201) })],
  ["an http logo_uri", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], logo_uri: "http://cdn.example.com/l.png" })],
  ["a client_uri that is not a URL", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], client_uri: "not a url" })],
  ["a body over the size limit", "invalid_request", () => reg({ redirect_uris: [goodUri], client_name: big(20_000) })],
  ["21 redirect URIs", "invalid_redirect_uri", () => reg({ redirect_uris: Array.from({ length: 21 }, (_, i) => `${goodUri}${i}`) })],
  ["a 3000-character redirect URI", "invalid_redirect_uri", () => reg({ redirect_uris: [`${goodUri}?${big(3000)}`] })],
  ["duplicate keys, the last one bad", "invalid_redirect_uri", () => reg(`{"redirect_uris":["${goodUri}"],"redirect_uris":["http://evil.example/cb"]}`)],
  ["deeply nested arrays", "invalid_client_metadata", () => reg(`${"[".repeat(5000)}${"]".repeat(5000)}`)],
  [
    "invalid UTF-8",
    "invalid_client_metadata",
    () => ({ headers: { "content-type": JSON_TYPE, "x-forwarded-for": freshIp() }, body: Buffer.from([0x7b, 0xff, 0xfe, 0x7d]) }),
  ],
  [
    "__proto__ with a bad redirect URI",
    "invalid_redirect_uri",
    () => reg('{"__proto__":{"token_endpoint_auth_method":"none"},"redirect_uris":["javascript:alert(1)"]}'),
  ],
  ["a client_name with a NUL byte", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], client_name: "a\u0000b" })],
  ["a scope with a NUL byte", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], scope: "mcp\u0000" })],
  ["a software_version with a NUL byte", "invalid_client_metadata", () => reg({ redirect_uris: [goodUri], software_version: "1\u0000" })],
  ["a redirect URI with a NUL byte", "invalid_redirect_uri", () => reg({ redirect_uris: [`${goodUri}\u0000`] })],
]);

// ---------- /authorize: client and redirect problems are pages ----------
const authz = (overrides: Record<string, string | undefined> = {}, suffix = "", client: TestClient = pub) => {
  const url = authorizeUrl(t.url, client, overrides);
  return { method: "GET", path: `${url.pathname}${url.search}${suffix}` };
};
const authzPost = (body: string | Buffer, type = FORM) => ({ path: "/authorize", headers: ct(type), body });
const validForm = () => authorizeUrl(t.url, pub).searchParams.toString();
add("/authorize", "page", [
  ["no parameters at all", () => ({ method: "GET", path: "/authorize" })],
  ["an unknown client", () => authz({ client_id: "mab_c_nobody" })],
  ["a 500-character client_id", () => authz({ client_id: big(500) })],
  ["a client_id with a NUL byte", () => authz({ client_id: "mab_c_\u0000x" })],
  ["client_id=%00", () => ({ method: "GET", path: "/authorize?client_id=%00" })],
  ["a state with a NUL byte for a valid client", () => authz({ state: "a\u0000b" })],
  ["a parameter name with a NUL byte", () => authz({}, "&x%00=1")],
  ["a broken percent-encoding in client_id", () => ({ method: "GET", path: "/authorize?client_id=%ZZ&response_type=code" })],
  ["a duplicated client_id", () => authz({}, "&client_id=other")],
  ["a duplicated redirect_uri", () => authz({}, `&redirect_uri=${encodeURIComponent("https://evil.example/cb")}`)],
  ["a duplicated response_type", () => authz({}, "&response_type=token")],
  ["a duplicated code_challenge_method", () => authz({}, "&code_challenge_method=plain")],
  ["an unregistered redirect URI", () => authz({ redirect_uri: "https://evil.example/cb" })],
  ["the registered redirect URI plus a fragment", () => authz({ redirect_uri: `${"http://127.0.0.1:7777/callback"}#x` })],
  [
    "an unregistered redirect URI and every other error too",
    () => authz({ redirect_uri: "https://evil.example/cb", response_type: "token", code_challenge: undefined, scope: "admin" }),
  ],
  ["POST as JSON", () => authzPost(JSON.stringify({ client_id: "x" }), JSON_TYPE)],
  ["POST as text/plain", () => authzPost("client_id=x", "text/plain")],
  ["POST without a content type", () => authzPost("client_id=x", "")],
  ["POST over the size limit", () => authzPost(`client_id=${big(70_000)}`)],
  ["POST with a duplicated client_id", () => ({ path: "/authorize", headers: { "content-type": FORM }, body: `${validForm()}&client_id=${pub.client_id}` })],
]);
// ---------- /authorize: later problems are redirected to the validated URI of a trusted client
// (the operator's), and shown as a page for a self-registered one this browser never approved ----------
const laterProblems: [string, string, Record<string, string | undefined> | (() => Record<string, string | undefined>)][] = [
  ["response_type missing", "invalid_request", { response_type: undefined }],
  ["response_type=token", "unsupported_response_type", { response_type: "token" }],
  ["code_challenge missing", "invalid_request", { code_challenge: undefined }],
  ["code_challenge_method=plain", "invalid_request", { code_challenge_method: "plain" }],
  ["a code_challenge of the wrong length", "invalid_request", { code_challenge: big(44) }],
  ["an unsupported scope", "invalid_scope", { scope: "admin" }],
  ["a resource elsewhere", "invalid_target", { resource: "https://elsewhere.example/mcp" }],
  ["a resource with a fragment", "invalid_target", () => ({ resource: `${t.url}/mcp#f` })],
  ["a state of 8000 characters", "invalid_request", { state: big(8000) }],
];
const overridesOf = (o: Record<string, string | undefined> | (() => Record<string, string | undefined>)) => (typeof o === "function" ? o() : o);
addWithCode(
  "/authorize",
  "redirect",
  laterProblems.map(([name, code, o]) => [`${name} (operator's client)`, code, () => authz(overridesOf(o), "", basic)]),
);
add(
  "/authorize",
  "page",
  laterProblems.map(([name, _code, o]) => [`${name} (self-registered, never approved)`, () => authz(overridesOf(o))]),
);
add("/authorize", "any", [["a 20 kB query string (over the header limit)", () => authz({ state: big(20_000) })]]);

// ---------- /token (RFC 6749 §5.2: JSON errors) ----------
const tok = (form: string | Record<string, string>, headers: Record<string, string> = {}, type: string = FORM) => ({
  path: "/token",
  headers: { ...ct(type), ...headers },
  body: typeof form === "string" ? form : new URLSearchParams(form).toString(),
});
const asBasic = () => ({ authorization: basicAuth(basic.client_id, basic.client_secret!) });
const pubCode = (extra: Record<string, string> = {}) => ({
  grant_type: "authorization_code",
  client_id: pub.client_id,
  code: "mab_ac_nope",
  code_verifier: big(43),
  redirect_uri: "http://127.0.0.1:7777/callback",
  ...extra,
});
addWithCode("/token", "json", [
  ["a JSON body", "invalid_request", () => tok(JSON.stringify(pubCode()), {}, JSON_TYPE)],
  ["text/plain", "invalid_request", () => tok(pubCode(), {}, "text/plain")],
  ["no content type", "invalid_request", () => tok(pubCode(), {}, "")],
  [
    "multipart",
    "invalid_request",
    () => tok("--x\r\nContent-Disposition: form-data; name=grant_type\r\n\r\npassword\r\n--x--", {}, "multipart/form-data; boundary=x"),
  ],
  ["an empty body", "invalid_client", () => tok("")],
  ["grant_type missing", "invalid_request", () => tok({ client_id: pub.client_id, code: "x" })],
  ["grant_type twice", "invalid_request", () => tok(`grant_type=authorization_code&grant_type=refresh_token&client_id=${pub.client_id}`)],
  ["client_id twice", "invalid_request", () => tok(`grant_type=authorization_code&client_id=${pub.client_id}&client_id=${post.client_id}`)],
  ["code twice", "invalid_request", () => tok(`${new URLSearchParams(pubCode())}&code=other`)],
  ["a body over the size limit", "invalid_request", () => tok(pubCode({ code: big(70_000) }))],
  ["grant_type=password", "unsupported_grant_type", () => tok({ grant_type: "password", client_id: pub.client_id, username: "a", password: "b" })],
  ["grant_type=implicit", "unsupported_grant_type", () => tok({ grant_type: "implicit", client_id: pub.client_id })],
  [
    "the device code grant",
    "unsupported_grant_type",
    () => tok({ grant_type: "urn:ietf:params:oauth:grant-type:device_code", client_id: pub.client_id, device_code: "x" }),
  ],
  ["the JWT bearer grant", "unsupported_grant_type", () => tok({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion: "x.y.z" }, asBasic())],
  ["an empty grant_type", "invalid_request", () => tok({ grant_type: "", client_id: pub.client_id })],
  ["grant_type in upper case", "unsupported_grant_type", () => tok({ grant_type: "AUTHORIZATION_CODE", client_id: pub.client_id })],
  ["an unknown client", "invalid_client", () => tok(pubCode({ client_id: "mab_c_nobody" }))],
  ["a wrong Basic secret", "invalid_client", () => tok({ grant_type: "client_credentials" }, { authorization: basicAuth(basic.client_id, "wrong") })],
  ["a wrong post secret", "invalid_client", () => tok({ grant_type: "refresh_token", refresh_token: "x", client_id: post.client_id, client_secret: "wrong" })],
  ["Basic and post at once", "invalid_client", () => tok({ grant_type: "client_credentials", client_secret: basic.client_secret! }, asBasic())],
  ["Basic that is not base64", "invalid_client", () => tok({ grant_type: "client_credentials" }, { authorization: "Basic %%%" })],
  ["a Bearer Authorization header", "invalid_client", () => tok({ grant_type: "client_credentials" }, { authorization: "Bearer xyz" })],
  ["a public client with a secret", "invalid_client", () => tok(pubCode({ client_secret: "s" }))],
  ["a confidential client without a secret", "invalid_client", () => tok({ grant_type: "client_credentials", client_id: basic.client_id })],
  ["an unknown code", "invalid_grant", () => tok(pubCode())],
  ["code missing", "invalid_request", () => tok({ grant_type: "authorization_code", client_id: pub.client_id, code_verifier: big(43) })],
  [
    "code_verifier missing",
    "invalid_request",
    () => tok({ grant_type: "authorization_code", client_id: pub.client_id, code: "x", redirect_uri: "http://127.0.0.1:7777/callback" }),
  ],
  ["a code_verifier of 129 characters", "invalid_grant", () => tok(pubCode({ code_verifier: big(129) }))],
  ["refresh_token missing", "invalid_request", () => tok({ grant_type: "refresh_token", client_id: pub.client_id })],
  ["an unknown refresh token", "invalid_grant", () => tok({ grant_type: "refresh_token", client_id: pub.client_id, refresh_token: "mab_rt_nope" })],
  [
    "a refresh with an unsupported scope",
    "invalid_scope",
    () => tok({ grant_type: "refresh_token", client_id: pub.client_id, refresh_token: "mab_rt_nope", scope: "admin" }),
  ],
  ["client_credentials with an unsupported scope", "invalid_scope", () => tok({ grant_type: "client_credentials", scope: "admin" }, asBasic())],
  ["client_credentials for a public client", "unauthorized_client", () => tok({ grant_type: "client_credentials", client_id: pub.client_id })],
  ["a resource with a fragment", "invalid_target", () => tok({ grant_type: "client_credentials", resource: `${t.url}/mcp#x` }, asBasic())],
  ["a resource elsewhere", "invalid_target", () => tok({ grant_type: "client_credentials", resource: "https://elsewhere.example/mcp" }, asBasic())],
  ["a 50 kB code", "invalid_grant", () => tok(pubCode({ code: big(50_000) }))],
  ["a 10 kB client_id", "invalid_client", () => tok(pubCode({ client_id: big(10_000) }))],
  ["a 5 kB Basic user name", "invalid_client", () => tok({ grant_type: "client_credentials" }, { authorization: basicAuth(big(5000), "x") })],
  ["a broken percent-encoding", "unsupported_grant_type", () => tok(`grant_type=%E0%A4%A&client_id=${pub.client_id}`)],
  ["client_id=%00", "invalid_request", () => tok("grant_type=authorization_code&client_id=%00&code=x")],
  ["a code with a NUL byte", "invalid_request", () => tok(pubCode({ code: "mab_ac_\u0000" }))],
  ["a refresh token with a NUL byte", "invalid_request", () => tok({ grant_type: "refresh_token", client_id: pub.client_id, refresh_token: "\u0000" })],
  ["a Basic client id with a NUL byte", "invalid_client", () => tok({ grant_type: "client_credentials" }, { authorization: basicAuth("\u0000", "x") })],
  ["a client_assertion that is not a JWT", "invalid_client", () => tok({ grant_type: "client_credentials", ...assertion("x.y.z") })],
  [
    "a client_assertion without its type",
    "invalid_client",
    () => tok({ grant_type: "client_credentials", client_id: basic.client_id, client_assertion: "a.b.c" }),
  ],
  ["a SAML client_assertion_type", "invalid_client", () => tok({ grant_type: "client_credentials", client_id: basic.client_id, ...assertion("a.b.c", SAML) })],
  [
    "client_assertion twice",
    "invalid_request",
    () => tok(`grant_type=client_credentials&client_assertion_type=${encodeURIComponent(JWT_BEARER)}&client_assertion=a&client_assertion=b`),
  ],
  [
    "a client_assertion and a secret at once",
    "invalid_client",
    () => tok({ grant_type: "client_credentials", client_secret: "s", ...assertion("a.b.c") }, asBasic()),
  ],
  ["a client_assertion for a public client", "invalid_client", () => tok(pubCode(assertion("a.b.c")))],
  [
    "a client_assertion for a secret client",
    "invalid_client",
    () => tok({ grant_type: "client_credentials", client_id: basic.client_id, ...assertion(unsignedFor(basic.client_id)) }),
  ],
  ["a 20 kB client_assertion", "invalid_client", () => tok({ grant_type: "client_credentials", client_id: basic.client_id, ...assertion(big(20_000)) })],
]);
add("/token", "any", [["GET instead of POST", () => ({ method: "GET", path: `/token?grant_type=client_credentials&client_id=${pub.client_id}` })]]);

// ---------- /revoke (RFC 7009) ----------
const rev = (form: string | Record<string, string>, headers: Record<string, string> = {}, type: string = FORM) => ({
  ...tok(form, headers, type),
  path: "/revoke",
});
addWithCode("/revoke", "json", [
  ["no client authentication", "invalid_client", () => rev({ token: "x" })],
  ["an unknown client", "invalid_client", () => rev({ token: "x", client_id: "mab_c_nobody" })],
  ["token missing", "invalid_request", () => rev({ client_id: pub.client_id })],
  ["token twice", "invalid_request", () => rev(`token=a&token=b&client_id=${pub.client_id}`)],
  ["a JSON body", "invalid_request", () => rev(JSON.stringify({ token: "x", client_id: pub.client_id }), {}, JSON_TYPE)],
  ["text/plain", "invalid_request", () => rev({ token: "x", client_id: pub.client_id }, {}, "text/plain")],
  ["a wrong secret", "invalid_client", () => rev({ token: "x" }, { authorization: basicAuth(basic.client_id, "wrong") })],
  ["Basic and post at once", "invalid_client", () => rev({ token: "x", client_id: post.client_id, client_secret: post.client_secret! }, asBasic())],
  ["a body over the size limit", "invalid_request", () => rev({ token: big(70_000), client_id: pub.client_id })],
  ["a confidential client without its secret", "invalid_client", () => rev({ token: "x", client_id: post.client_id })],
  ["client_id=%00", "invalid_request", () => rev("token=x&client_id=%00")],
  ["a token with a NUL byte", "invalid_request", () => rev({ token: "a\u0000", client_id: pub.client_id })],
  ["a client_assertion that is not a JWT", "invalid_client", () => rev({ token: "x", ...assertion("x.y.z") })],
]);

// ---------- /introspect (RFC 7662) ----------
const intro = (form: string | Record<string, string>, headers: Record<string, string> = {}, type: string = FORM) => ({
  ...tok(form, headers, type),
  path: "/introspect",
});
addWithCode("/introspect", "json", [
  ["a public client", "invalid_client", () => intro({ token: "x", client_id: pub.client_id })],
  ["no client authentication", "invalid_client", () => intro({ token: "x" })],
  ["token missing", "invalid_request", () => intro({}, asBasic())],
  ["a JSON body", "invalid_request", () => intro(JSON.stringify({ token: "x" }), asBasic(), JSON_TYPE)],
  ["a wrong secret", "invalid_client", () => intro({ token: "x" }, { authorization: basicAuth(basic.client_id, "wrong") })],
  ["token twice", "invalid_request", () => intro("token=a&token=b", asBasic())],
  ["a body over the size limit", "invalid_request", () => intro({ token: big(70_000) }, asBasic())],
  ["a Bearer Authorization header", "invalid_client", () => intro({ token: "x" }, { authorization: "Bearer x" })],
  ["only a token_type_hint", "invalid_request", () => intro({ token_type_hint: "access_token" }, asBasic())],
  ["a post client using Basic", "invalid_client", () => intro({ token: "x" }, { authorization: basicAuth(post.client_id, post.client_secret!) })],
  ["client_id=%00", "invalid_request", () => intro("token=x&client_id=%00&client_secret=y")],
  ["a token with a NUL byte", "invalid_request", () => intro({ token: "\u0000" }, asBasic())],
  ["an unsigned client_assertion", "invalid_client", () => intro({ token: "x", ...assertion(unsignedFor(basic.client_id)) })],
]);

// ---------- browser pages: /consent and the upstream callback ----------
add("/consent", "page", [
  ["GET with transaction=%00", () => ({ method: "GET", path: "/consent?transaction=%00" })],
  ["GET with an unknown transaction", () => ({ method: "GET", path: "/consent?transaction=nope" })],
  ["GET with transaction twice", () => ({ method: "GET", path: "/consent?transaction=a&transaction=b" })],
  ["POST with transaction=%00", () => ({ headers: { "content-type": FORM }, body: "transaction=%00&csrf=x&decision=allow" })],
  ["POST as JSON", () => ({ headers: { "content-type": JSON_TYPE }, body: "{}" })],
]);
add("/oauth/callback", "page", [
  ["state=%00", () => ({ method: "GET", path: "/oauth/callback?state=%00&code=x" })],
  ["state=a%00b", () => ({ method: "GET", path: "/oauth/callback?state=a%00b&code=x" })],
  ["an unknown state", () => ({ method: "GET", path: "/oauth/callback?state=nope&code=x" })],
  ["no state", () => ({ method: "GET", path: "/oauth/callback?code=x" })],
  ["state twice", () => ({ method: "GET", path: "/oauth/callback?state=a&state=b" })],
  ["an error with a NUL byte", () => ({ method: "GET", path: "/oauth/callback?state=nope&error=%00" })],
]);

function check({ expect: kind, code }: Case, res: HttpResult): void {
  expect(res.status).toBeLessThan(500);
  expect(res.status).toBeGreaterThanOrEqual(300);
  if (kind === "json") {
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.json).toEqual(expect.objectContaining({ error: code, error_description: expect.any(String) }));
  } else if (kind === "page") {
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.headers.get("location")).toBeNull();
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
  } else if (kind === "redirect") {
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe(pub.redirect_uri);
    expect(location.searchParams.get("error")).toBe(code);
    expect(location.searchParams.get("iss")).toBe(t.url);
  }
}

describe.each(databaseTargets("the malformed-request table").map((target) => [target.name, target] as const))("malformed requests on %s", (_name, target) => {
  beforeAll(() => setUp(target), 60_000);
  afterAll(async () => {
    await t.stop();
    await cleanup();
  });

  it.each(cases.map((c) => [c.name, c] as const))("%s", async (_name, c) => {
    const db = t.broker.database.db;
    const before = await countRows(db);
    const { method = "POST", path, headers, body } = c.request();
    const res = await send(`${t.url}${path}`, { method, ...(headers ? { headers } : {}), ...(body !== undefined ? { body } : {}) });
    check(c, res);
    expect(await countRows(db)).toEqual(before);
  });
});
