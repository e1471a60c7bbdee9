// ChatGPT connectors, replayed, both ways ChatGPT identifies itself: dynamic registration with an
// https redirect on chatgpt.com, and its Client ID Metadata Document with private_key_jwt.
//
// - Registration: redirect_uris [https://chatgpt.com/connector_platform_oauth_redirect] (the fixed
//   callback; newer connectors use https://chatgpt.com/connector/oauth/<id>: kunickiaj/codemem#1286,
//   makeplane/plane-mcp-server#165, danielealbano/android-remote-control-mcp#166, which also
//   notes ChatGPT asking for offline_access), public client (token_endpoint_auth_method none),
//   authorization_code + refresh_token.
// - Authorization: redirect_uri as registered, PKCE S256, state, resource = the MCP URL, scope.
// - Token: redirect_uri, client_id, code_verifier, resource.
//
// The metadata document (issue texts of Altinity/altinity-mcp#118, engram-app/Engram#1633 and
// django-oauth/django-oauth-toolkit#1845 quote it): client_id https://chatgpt.com/oauth/<id>/client.json,
// redirect https://chatgpt.com/connector/oauth/<id>, token_endpoint_auth_method private_key_jwt with
// token_endpoint_auth_methods_supported ["none", "private_key_jwt"], token_endpoint_auth_signing_alg
// RS256 and jwks_uri https://chatgpt.com/oauth/jwks.json, whose RSA key has a kid
// (cimd-20260428030119 in Engram#1633). ChatGPT does not fall back to "none" (Engram#1637): at /token
// it sends a client_assertion it signed RS256 with that kid, iss = sub = the client_id and aud = the
// token endpoint (Altinity's verifier requires exactly that, and ChatGPT connects to it).
//
// An https redirect is where the open redirector was: anyone can register chatgpt.com look-alikes
// (or any site), and /authorize used to send an error there before the user saw anything. A
// connector the user never approved now gets a page; one this browser approved gets its errors.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { s256Challenge } from "../../src/grants/pkce.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { tokenRequest } from "../support/oauth-flow.ts";
import { startBroker, startTwoInstances, type TestBroker, type TwoInstances } from "../support/start-broker.ts";
import { startDocumentServer, type DocumentServer } from "../support/document-server.ts";
import { createPostgresDatabase, postgresAvailable, type TestPostgresDatabase } from "../support/pg-database.ts";
import { authorizeUrl as validAuthorizeUrl, postForm } from "../support/oauth-client.ts";
import { assertionClaims, assertionForm, hmacWithPublicKey, keySet, sign, signingKey, unsigned, type SigningKey } from "../support/client-assertion.ts";
import { CHATGPT_CONNECTOR, CHATGPT_CONNECTOR_CALLBACK, CHATGPT_DCR_CALLBACK, CHATGPT_KID, CHATGPT_REGISTRATION, chatgptDocument } from "./replays.ts";

const CALLBACK = CHATGPT_DCR_CALLBACK;

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

async function register(redirect = CALLBACK): Promise<string> {
  const res = await fetch(`${t.url}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...CHATGPT_REGISTRATION, redirect_uris: [redirect] }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

/** ChatGPT's /authorize request: PKCE S256 with `verifier`, a random state, its scopes, the MCP URL as resource; then `extra`. */
function authorizeUrl(clientId: string, verifier: string, extra: Record<string, string> = {}, redirect = CALLBACK, brokerUrl = t.url): string {
  const asChatgpt = { state: randomBytes(16).toString("hex"), scope: "mcp offline_access", ...extra };
  return validAuthorizeUrl(brokerUrl, { client_id: clientId, redirect_uri: redirect }, asChatgpt, s256Challenge(verifier)).href;
}

describe("ChatGPT connectors (DCR, https redirect)", () => {
  it("connects: consent, code to chatgpt.com, tokens", async () => {
    const clientId = await register();
    const verifier = randomBytes(32).toString("base64url");
    const callback = await new HttpBrowser().walk(authorizeUrl(clientId, verifier), CALLBACK, answerAs("alice"));
    const tokens = await tokenRequest(t.url, {
      grant_type: "authorization_code",
      client_id: clientId,
      code: callback.searchParams.get("code")!,
      code_verifier: verifier,
      redirect_uri: CALLBACK,
      resource: `${t.url}/mcp`,
    });
    expect(tokens.status).toBe(200);
    expect(tokens.body).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), scope: "mcp offline_access" });
  });

  it("never redirects an error to an https URI the browser's user did not approve", async () => {
    // The same registration, pointing anywhere: errors from /authorize are a page, not a 302.
    const evil = "https://attacker.example/landing";
    const clientId = await register(evil);
    const brokenRequests: Record<string, string>[] = [
      { code_challenge_method: "plain" },
      { resource: "https://elsewhere.example/mcp" },
      { response_type: "token" },
    ];
    for (const broken of brokenRequests) {
      const res = await fetch(authorizeUrl(clientId, randomBytes(32).toString("base64url"), broken, evil), { redirect: "manual" });
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).not.toContain("attacker.example");
    }
  });

  it("sends errors back to chatgpt.com once this browser approved the connector", async () => {
    const clientId = await register();
    const browser = new HttpBrowser();
    await browser.walk(authorizeUrl(clientId, randomBytes(32).toString("base64url")), CALLBACK, answerAs("alice"));
    const res = await browser.request(authorizeUrl(clientId, randomBytes(32).toString("base64url"), { code_challenge_method: "plain" }));
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe(CALLBACK);
    expect(location.searchParams.get("error")).toBe("invalid_request");
  });
});

// ---- The metadata document and private_key_jwt -------------------------------------------------

/** Signs in as `user` through ChatGPT's connector: the callback's code and the PKCE verifier. */
async function connectorCode(brokerUrl: string, clientId: string, callback = CHATGPT_CONNECTOR_CALLBACK, user = "alice") {
  const verifier = randomBytes(32).toString("base64url");
  const landed = await new HttpBrowser().walk(authorizeUrl(clientId, verifier, {}, callback, brokerUrl), callback, answerAs(user));
  return { code: landed.searchParams.get("code")!, verifier };
}

/** The broker fetches and records the document when an authorization starts: start one. */
async function introduce(brokerUrl: string, clientId: string): Promise<void> {
  const url = new URL(`${brokerUrl}/authorize`);
  const query = {
    response_type: "code",
    client_id: clientId,
    redirect_uri: CHATGPT_CONNECTOR_CALLBACK,
    code_challenge: s256Challenge("v".repeat(43)),
    code_challenge_method: "S256",
  };
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  const res = await fetch(url, { redirect: "manual" });
  if (res.status !== 302) throw new Error(`the broker did not take ChatGPT's document: ${res.status} ${(await res.text()).slice(0, 300)}`);
}

/**
 * chatgpt.com's https server, publishing the connector's document and the key set of `key`,
 * ChatGPT's signing key (the key set's response carries `jwksHeaders`).
 */
async function publishChatgpt(jwksHeaders: Record<string, string> = {}) {
  const docs = await startDocumentServer(["chatgpt.com"]);
  const origin = `https://chatgpt.com:${docs.port}`;
  const key = await signingKey(CHATGPT_KID, "RS256");
  docs.json(`/oauth/${CHATGPT_CONNECTOR}/client.json`, chatgptDocument(origin));
  docs.json("/oauth/jwks.json", keySet(key), jwksHeaders);
  return { docs, key, clientId: `${origin}/oauth/${CHATGPT_CONNECTOR}/client.json` };
}

describe("ChatGPT (metadata document, private_key_jwt)", () => {
  let docs: DocumentServer;
  let broker: TestBroker;
  let key: SigningKey;
  let clientId: string;
  /** A client assertion as ChatGPT signs one for `brokerUrl`'s token endpoint. */
  const assertion = (overrides: Record<string, unknown> = {}, brokerUrl = broker.url) => sign(key, assertionClaims(clientId, `${brokerUrl}/token`, overrides));

  beforeAll(async () => {
    ({ docs, key, clientId } = await publishChatgpt({ "cache-control": "public, max-age=3600" }));
    broker = await startBroker(
      { CIMD_ALLOW_PRIVATE_NETWORKS: "true" },
      // keys.internal.test: a key set's host that resolves to the cloud metadata service.
      { documentFetch: { lookup: docs.lookup({ "chatgpt.com": "127.0.0.1", "keys.internal.test": "169.254.169.254" }), ca: docs.caCert } },
    );
    await introduce(broker.url, clientId);
  });
  afterAll(async () => {
    await broker.stop();
    await docs.close();
  });

  it("advertises private_key_jwt and the algorithms it accepts, beside none", async () => {
    const meta = (await (await fetch(`${broker.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, string[]>;
    for (const field of [
      "token_endpoint_auth_methods_supported",
      "revocation_endpoint_auth_methods_supported",
      "introspection_endpoint_auth_methods_supported",
    ])
      expect(meta[field]).toContain("private_key_jwt");
    expect(meta.token_endpoint_auth_methods_supported).toContain("none");
    for (const field of ["token_endpoint_auth_signing_alg_values_supported", "revocation_endpoint_auth_signing_alg_values_supported"]) {
      expect(meta[field]).toEqual(expect.arrayContaining(["RS256", "PS256", "ES256", "EdDSA"]));
      expect(meta[field]!.filter((alg) => alg === "none" || alg.startsWith("HS"))).toEqual([]);
    }
  });

  it("connects: consent, code, a token for a signed assertion, a tool call, refresh, introspection and revocation", async () => {
    const { code, verifier } = await connectorCode(broker.url, clientId);
    const tokens = await tokenRequest(broker.url, {
      grant_type: "authorization_code",
      code,
      redirect_uri: CHATGPT_CONNECTOR_CALLBACK,
      code_verifier: verifier,
      client_id: clientId,
      resource: `${broker.url}/mcp`,
      ...assertionForm(await assertion()),
    });
    expect(tokens.status).toBe(200);
    expect(tokens.body).toMatchObject({ token_type: "Bearer", scope: "mcp offline_access", refresh_token: expect.any(String) });

    // ChatGPT then calls a tool with the token (a real MCP client over Streamable HTTP).
    const client = new Client({ name: "openai-mcp", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${tokens.body.access_token as string}` } },
    });
    await client.connect(transport);
    try {
      const result = (await client.callTool({ name: "whoami", arguments: {} })) as { content: Array<{ text: string }> };
      expect(JSON.parse(result.content[0]!.text)).toMatchObject({ subject: "demo:alice", clientId });
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }

    const refreshed = await tokenRequest(broker.url, {
      grant_type: "refresh_token",
      refresh_token: tokens.body.refresh_token as string,
      client_id: clientId,
      ...assertionForm(await assertion()),
    });
    expect(refreshed.status).toBe(200);
    const access = refreshed.body.access_token as string;
    const introspected = await postForm(`${broker.url}/introspect`, { token: access, client_id: clientId, ...assertionForm(await assertion()) });
    expect(introspected.json).toMatchObject({ active: true, client_id: clientId, sub: "demo:alice" });
    const revoked = await postForm(`${broker.url}/revoke`, { token: access, client_id: clientId, ...assertionForm(await assertion()) });
    expect(revoked.status).toBe(200);
    expect((await postForm(`${broker.url}/introspect`, { token: access, client_id: clientId, ...assertionForm(await assertion()) })).json).toEqual({
      active: false,
    });
    const row = await broker.broker.database.db.client.findUniqueOrThrow({ where: { id: clientId } });
    expect(row).toMatchObject({ registrationType: "cimd", tokenEndpointAuthMethod: "private_key_jwt", fallbackAuthMethod: "none", secretHash: null });
  });

  /** A token request ChatGPT could send, with `clientAuth` in place of its own assertion. */
  const tokenWith = (clientAuth: Record<string, string>) =>
    postForm(`${broker.url}/token`, {
      grant_type: "authorization_code",
      code: "never-issued",
      redirect_uri: CHATGPT_CONNECTOR_CALLBACK,
      code_verifier: "v".repeat(43),
      client_id: clientId,
      ...clientAuth,
    });

  /** The answer a refused client authentication gets: invalid_client, 401, a challenge, a reason. */
  function refused(res: Awaited<ReturnType<typeof tokenWith>>, reason: RegExp): void {
    expect([res.status, res.json?.error]).toEqual([401, "invalid_client"]);
    expect(res.headers.get("www-authenticate")).toMatch(/^Basic /);
    expect(res.json?.error_description).toMatch(reason);
  }

  it.each<[string, () => Promise<string>, RegExp]>([
    [
      "signed by another key (with ChatGPT's kid)",
      async () => sign(await signingKey(CHATGPT_KID), assertionClaims(clientId, `${broker.url}/token`)),
      /signature does not verify/,
    ],
    [
      "a key the key set does not hold",
      async () => sign(await signingKey("someone-elses-kid"), assertionClaims(clientId, `${broker.url}/token`)),
      /no key of the client's key set fits it/,
    ],
    ["not signed (alg none)", async () => unsigned(assertionClaims(clientId, `${broker.url}/token`), CHATGPT_KID), /not signed \(alg none\)/],
    ["HS256 keyed with ChatGPT's public key", () => hmacWithPublicKey(key, assertionClaims(clientId, `${broker.url}/token`)), /alg "HS256".*RS256/],
    ["for another server (aud)", () => assertion({ aud: "https://elsewhere.example/token" }), /aud must name this server/],
    ["expired", () => assertion({ iat: Math.floor(Date.now() / 1000) - 600, exp: Math.floor(Date.now() / 1000) - 120 }), /has expired/],
    ["valid for an hour", () => assertion({ exp: Math.floor(Date.now() / 1000) + 3600 }), /expires too late/],
    ["without exp", () => assertion({ exp: undefined }), /no exp claim/],
    ["without jti", () => assertion({ jti: undefined }), /no jti claim/],
    [
      "from another client (iss and sub)",
      () => assertion({ iss: "https://evil.example/client.json", sub: "https://evil.example/client.json" }),
      /iss and sub must both be the client_id/,
    ],
    ["not a JWT", async () => "garbage", /not a signed JWT/],
  ])("refuses an assertion %s: invalid_client, 401", async (_label, make, reason) => {
    refused(await tokenWith(assertionForm(await make())), reason);
  });

  it("accepts a jti once: the same assertion again is refused, on /token and on /revoke", async () => {
    const once = await assertion();
    // Client authentication passes (the code is then refused): the jti is spent.
    expect((await tokenWith(assertionForm(once))).json?.error).toBe("invalid_grant");
    refused(await tokenWith(assertionForm(once)), /presented before/);
    refused(await postForm(`${broker.url}/revoke`, { token: "x", client_id: clientId, ...assertionForm(once) }), /presented before/);
    // Remembered until it expires, then swept.
    const used = await broker.broker.database.db.usedAssertion.count();
    expect(used).toBeGreaterThan(0);
    const swept = await broker.broker.services.grants.sweep({ now: new Date(Date.now() + 3600_000) });
    expect(swept.usedAssertions).toBe(used);
    expect(await broker.broker.database.db.usedAssertion.count()).toBe(0);
  });

  it("its document lists none: without an assertion PKCE alone carries it; with one, the assertion must hold", async () => {
    // The code is refused, not the client.
    expect((await tokenWith({})).json?.error).toBe("invalid_grant");
    refused(await tokenWith({ client_secret: "guess" }), /authenticates with private_key_jwt/);
    // A document that does not list none (the version Altinity/altinity-mcp#118 quotes): the assertion is required.
    const id = "strictConnector";
    const strictId = `https://chatgpt.com:${docs.port}/oauth/${id}/client.json`;
    const { token_endpoint_auth_methods_supported: _, ...strict } = chatgptDocument(`https://chatgpt.com:${docs.port}`, id);
    docs.json(`/oauth/${id}/client.json`, strict);
    const { code, verifier } = await connectorCode(broker.url, strictId, `https://chatgpt.com/connector/oauth/${id}`);
    const exchange = (clientAuth: Record<string, string>) =>
      postForm(`${broker.url}/token`, {
        grant_type: "authorization_code",
        code,
        redirect_uri: `https://chatgpt.com/connector/oauth/${id}`,
        code_verifier: verifier,
        client_id: strictId,
        ...clientAuth,
      });
    refused(await exchange({}), /authenticates with private_key_jwt: send a client_assertion/);
    const ok = await exchange(assertionForm(await sign(key, assertionClaims(strictId, `${broker.url}/token`))));
    expect(ok.status).toBe(200);
  });

  it("a jwks_uri that resolves to the cloud metadata service is never fetched: invalid_client", async () => {
    const id = "metadataKeys";
    const otherId = `https://chatgpt.com:${docs.port}/oauth/${id}/client.json`;
    docs.json(`/oauth/${id}/client.json`, chatgptDocument(`https://chatgpt.com:${docs.port}`, id, { jwks_uri: "https://keys.internal.test/jwks.json" }));
    const { code, verifier } = await connectorCode(broker.url, otherId, `https://chatgpt.com/connector/oauth/${id}`);
    const before = docs.connections;
    const res = await postForm(`${broker.url}/token`, {
      grant_type: "authorization_code",
      code,
      redirect_uri: `https://chatgpt.com/connector/oauth/${id}`,
      code_verifier: verifier,
      client_id: otherId,
      ...assertionForm(await sign(key, assertionClaims(otherId, `${broker.url}/token`))),
    });
    refused(res, /could not be fetched: keys\.internal\.test resolves to 169\.254\.169\.254, a cloud metadata address/);
    expect(docs.connections).toBe(before);
  });
});

(postgresAvailable ? describe : describe.skip)("ChatGPT's assertions across two instances on one PostgreSQL database", () => {
  let docs: DocumentServer;
  let database: TestPostgresDatabase;
  let two: TwoInstances;
  let instances: [TestBroker, TestBroker];
  let key: SigningKey;
  let clientId: string;

  beforeAll(async () => {
    ({ docs, key, clientId } = await publishChatgpt());
    database = await createPostgresDatabase();
    const options = { documentFetch: { lookup: docs.lookup({ "chatgpt.com": "127.0.0.1" }), ca: docs.caCert } };
    two = await startTwoInstances(database.url, { CIMD_ALLOW_PRIVATE_NETWORKS: "true" }, options);
    instances = [two.first, two.second];
  }, 60_000);
  afterAll(async () => {
    await two.stop();
    await database.drop();
    await docs.close();
  });

  it("an assertion spent on one instance is refused by the other; sent to both at once, one wins", async () => {
    const [a, b] = instances;
    const { code, verifier } = await connectorCode(a.url, clientId);
    const spent = await sign(key, assertionClaims(clientId, `${a.url}/token`));
    const exchanged = await postForm(`${b.origin}/token`, {
      grant_type: "authorization_code",
      code,
      redirect_uri: CHATGPT_CONNECTOR_CALLBACK,
      code_verifier: verifier,
      client_id: clientId,
      ...assertionForm(spent),
    });
    expect(exchanged.status).toBe(200);
    const replayed = await postForm(`${a.origin}/token`, {
      grant_type: "refresh_token",
      refresh_token: exchanged.json!.refresh_token as string,
      client_id: clientId,
      ...assertionForm(spent),
    });
    expect([replayed.status, replayed.json?.error, replayed.json?.error_description]).toEqual([
      401,
      "invalid_client",
      expect.stringMatching(/presented before/),
    ]);

    const token = exchanged.json!.access_token as string;
    const twice = await sign(key, assertionClaims(clientId, `${a.url}/token`));
    const answers = await Promise.all(instances.map((i) => postForm(`${i.origin}/introspect`, { token, client_id: clientId, ...assertionForm(twice) })));
    expect(answers.map((r) => r.status).sort()).toEqual([200, 401]);
  });
});
