// /authorize. Client and redirect URI problems are pages, never redirects; every
// later problem goes to the validated redirect URI with error, error_description, state and iss.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { ClientRegistry } from "../../src/grants/clients.ts";
import { Consents } from "../../src/grants/consents.ts";
import { parseClientMetadata } from "../../src/grants/client-metadata.ts";
import { freePort, startBroker, type TestBroker } from "../support/start-broker.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { authorize } from "../support/oauth-flow.ts";
import {
  authorizeUrl,
  countRows,
  pkcePair,
  postForm,
  redirectParams,
  registerOperatorClient,
  registerTestClient,
  send,
  type TestClient,
} from "../support/oauth-client.ts";

let t: TestBroker;
let client: TestClient;
let twoUris: TestClient;
let narrow: TestClient;
let withQuery: TestClient;
let withQueryManual: TestClient;
beforeAll(async () => {
  t = await startBroker({ TRUST_PROXY: "true" });
  [client, twoUris, narrow, withQuery, withQueryManual] = await Promise.all([
    registerTestClient(t.url),
    registerTestClient(t.url, { redirect_uris: ["http://127.0.0.1:7777/a", "http://localhost:7778/b"] }),
    registerTestClient(t.url, { scope: "mcp" }),
    registerTestClient(t.url, { redirect_uris: ["https://app.example.com/cb?tenant=1"] }),
    registerOperatorClient(t.broker.database.db, {
      redirect_uris: ["https://app.example.com/cb?tenant=1"],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    }),
  ]);
});
afterAll(async () => t.stop());

const rows = () => countRows(t.broker.database.db);

describe("client and redirect URI errors: a page, never a redirect", () => {
  const evil = "https://evil.example/cb";
  const cases: [string, () => Record<string, string | undefined>][] = [
    ["client_id is missing", () => ({ client_id: undefined })],
    ["client_id is unknown", () => ({ client_id: "mab_c_doesnotexist0000000000" })],
    ["client_id is absurdly long", () => ({ client_id: "x".repeat(500) })],
    ["redirect_uri is not registered", () => ({ redirect_uri: evil })],
    ["redirect_uri is not registered and response_type is wrong too", () => ({ redirect_uri: evil, response_type: "token" })],
    ["redirect_uri is not registered and PKCE is missing too", () => ({ redirect_uri: evil, code_challenge: undefined })],
    ["redirect_uri differs by a trailing slash", () => ({ redirect_uri: `${client.redirect_uri}/` })],
    ["redirect_uri differs by case", () => ({ redirect_uri: client.redirect_uri.replace("callback", "CALLBACK") })],
    ["redirect_uri differs by an added path", () => ({ redirect_uri: `${client.redirect_uri}/../evil` })],
    ["redirect_uri differs by an added query", () => ({ redirect_uri: `${client.redirect_uri}?next=${evil}` })],
    ["redirect_uri differs by an added fragment", () => ({ redirect_uri: `${client.redirect_uri}#x` })],
    ["redirect_uri differs by the scheme on a loopback host", () => ({ redirect_uri: client.redirect_uri.replace("http:", "https:") })],
    ["redirect_uri differs by the path on another loopback port", () => ({ redirect_uri: "http://127.0.0.1:7778/callbacks" })],
    ["redirect_uri has userinfo before a loopback host", () => ({ redirect_uri: "http://127.0.0.1:7777@evil.example/callback" })],
    ["redirect_uri names a loopback port out of range", () => ({ redirect_uri: "http://127.0.0.1:70000/callback" })],
    ["redirect_uri uses localhost for a registered 127.0.0.1", () => ({ redirect_uri: client.redirect_uri.replace("127.0.0.1", "localhost") })],
    ["redirect_uri belongs to another client", () => ({ redirect_uri: withQuery.redirect_uri })],
    ["redirect_uri is empty", () => ({ redirect_uri: "" })],
  ];

  it.each(cases)("%s", async (_what, overrides) => {
    const before = await rows();
    const res = await send(authorizeUrl(t.url, client, overrides()).href);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.text).toContain("<h1>");
    // Nowhere to go from the page: the address may be shown as text (for the developer), never as a link or form target.
    expect(res.text).not.toMatch(/(?:href|action|src)="[^"]*evil\.example/);
    expect(await rows()).toEqual(before);
  });

  it("asks for redirect_uri when the client registered several", async () => {
    const res = await send(authorizeUrl(t.url, twoUris, { redirect_uri: undefined }).href);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect(res.text).toMatch(/redirect_uri is missing/);
  });

  it("shows a page for a duplicated client_id or redirect_uri", async () => {
    for (const dup of [`client_id=${client.client_id}`, `redirect_uri=${encodeURIComponent(client.redirect_uri)}`]) {
      const res = await send(`${authorizeUrl(t.url, client).href}&${dup}`);
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
    }
  });
});

describe("later errors: redirected only for a client the operator registered or this browser approved", () => {
  type Overrides = Record<string, string | undefined>;
  // Every error branch of validate(), each with a client whose redirect would otherwise be allowed.
  const cases: [string, string, () => TestClient, Overrides | (() => Overrides)][] = [
    ["response_type missing", "invalid_request", () => client, { response_type: undefined }],
    ["response_type=token", "unsupported_response_type", () => client, { response_type: "token" }],
    ["response_type=code id_token", "unsupported_response_type", () => client, { response_type: "code id_token" }],
    ["code_challenge missing", "invalid_request", () => client, { code_challenge: undefined }],
    ["code_challenge_method missing", "invalid_request", () => client, { code_challenge_method: undefined }],
    ["code_challenge_method=plain", "invalid_request", () => client, { code_challenge_method: "plain" }],
    ["code_challenge_method=s256 (wrong case)", "invalid_request", () => client, { code_challenge_method: "s256" }],
    ["a code_challenge that is not a SHA-256 (too short)", "invalid_request", () => client, { code_challenge: "abc" }],
    ["a code_challenge with characters outside base64url", "invalid_request", () => client, { code_challenge: `${"a".repeat(42)}=` }],
    ["an unsupported scope", "invalid_scope", () => client, { scope: "mcp admin" }],
    ["a scope with a forbidden character", "invalid_scope", () => client, { scope: 'mcp "x' }],
    ["a resource on another host", "invalid_target", () => client, { resource: "https://other.example.com/mcp" }],
    ["a resource at another path", "invalid_target", () => client, () => ({ resource: `${t.url}/other` })],
    ["a resource with a sub-path", "invalid_target", () => client, () => ({ resource: `${t.url}/mcp/x` })],
    ["a resource with a fragment", "invalid_target", () => client, () => ({ resource: `${t.url}/mcp#frag` })],
    ["a resource with userinfo", "invalid_target", () => client, () => ({ resource: `${t.url.replace("http://", "http://user@")}/mcp` })],
    ["a relative resource", "invalid_target", () => client, { resource: "/mcp" }],
    ["an empty resource", "invalid_target", () => client, { resource: "" }],
    ["a resource that is not a URL", "invalid_target", () => client, { resource: "urn:mcp:server" }],
    ["a client not registered for authorization_code", "unauthorized_client", () => noCode, {}],
    ["a state over 2048 characters", "invalid_request", () => client, { state: "s".repeat(2049) }],
  ];
  const lazy = (o: Overrides | (() => Overrides)) => (typeof o === "function" ? o() : o);

  /** The same client, registered by the operator (`clients add`): its errors are redirected without any approval. */
  const operatorTwin = new Map<TestClient, TestClient>();
  /** A browser that approved `client`, `narrow` and `noCode`'s twin… (a remembered consent each). */
  let approving: HttpBrowser;
  let noCode: TestClient;
  let noCodeManual: TestClient;
  beforeAll(async () => {
    // A self-registered client without the code grant cannot come from /register: made in the registry.
    const made = async (type: "dynamic" | "manual") => {
      const body = { redirect_uris: ["http://127.0.0.1:7779/cb"], token_endpoint_auth_method: "client_secret_basic", grant_types: ["client_credentials"] };
      const { client: c } = await new ClientRegistry(t.broker.database.db).register(parseClientMetadata(body, "manual"), type);
      return { client_id: c.id, redirect_uri: c.redirectUris[0]! } as TestClient;
    };
    [noCode, noCodeManual] = await Promise.all([made("dynamic"), made("manual")]);
    for (const c of [client, narrow]) {
      operatorTwin.set(
        c,
        await registerOperatorClient(t.broker.database.db, {
          redirect_uris: [c.redirect_uri],
          token_endpoint_auth_method: "none",
          grant_types: ["authorization_code"],
          response_types: ["code"],
          scope: c.scope,
        }),
      );
    }
    operatorTwin.set(noCode, noCodeManual);
    approving = new HttpBrowser();
    await authorize(t.url, client, { browser: approving });
    await authorize(t.url, narrow, { browser: approving });
    // noCode can never be approved through /authorize: its remembered consent is written directly.
    const sid = await t.broker.database.db.consent.findFirstOrThrow({ where: { clientId: client.client_id }, select: { browserSessionId: true } });
    await new Consents(t.broker.database.db).remember({
      browserSessionId: sid.browserSessionId,
      clientId: noCode.client_id,
      redirectUri: noCode.redirect_uri,
      scope: "mcp",
      resource: t.broker.config.resourceUrl,
    });
  });

  const expectRedirect = (res: { status: number; headers: Headers }, c: TestClient, error: string, overrides: Overrides) => {
    expect(res.status).toBe(302);
    const { url, params } = redirectParams(res as Response);
    expect(`${url.origin}${url.pathname}`).toBe(c.redirect_uri.split("?")[0]);
    expect(params).toMatchObject({ error, iss: t.url });
    expect(params.error_description).toEqual(expect.any(String));
    expect(params.state).toBe(overrides.state ?? "st-123");
  };

  it.each(cases)("%s → %s: a page for a self-registered client this browser never approved", async (_what, error, who, o) => {
    const before = await rows();
    const res = await send(authorizeUrl(t.url, who(), lazy(o)).href);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
    expect(res.text).toContain(`(${error})`);
    expect(await rows()).toEqual(before);
  });

  it.each(cases)("%s → %s: redirected for a client this browser approved", async (_what, error, who, o) => {
    const overrides = lazy(o);
    const before = await rows();
    const res = await approving.request(authorizeUrl(t.url, who(), overrides).href);
    expectRedirect(res, who(), error, overrides);
    expect(await rows()).toEqual(before);
  });

  it.each(cases)("%s → %s: redirected for a client the operator registered", async (_what, error, who, o) => {
    const overrides = lazy(o);
    const c = operatorTwin.get(who())!;
    const before = await rows();
    const res = await send(authorizeUrl(t.url, c, overrides).href);
    expectRedirect(res, c, error, overrides);
    expect(await rows()).toEqual(before);
  });

  it("shows a page when another client was approved in this browser, or this client in another browser", async () => {
    for (const [browser, c] of [
      [approving, twoUris],
      [new HttpBrowser(), client],
    ] as const) {
      const res = await browser.request(authorizeUrl(t.url, c, { response_type: "token" }).href);
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
    }
  });

  it("shows a page once the remembered approval has expired", async () => {
    const c = await registerTestClient(t.url);
    const browser = new HttpBrowser();
    await authorize(t.url, c, { browser });
    expect((await browser.request(authorizeUrl(t.url, c, { response_type: "token" }).href)).status).toBe(302);
    await t.broker.database.db.consent.updateMany({ where: { clientId: c.client_id }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const res = await browser.request(authorizeUrl(t.url, c, { response_type: "token" }).href);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
  });

  it("omits state when the client sent none, and keeps the registered query", async () => {
    const res = await send(authorizeUrl(t.url, withQueryManual, { state: undefined, response_type: "token" }).href);
    const { url, params } = redirectParams(res);
    expect(url.origin + url.pathname).toBe("https://app.example.com/cb");
    expect(params).toEqual({ tenant: "1", error: "unsupported_response_type", error_description: expect.any(String), iss: t.url });
  });

  it("redirects POST /authorize errors the same way", async () => {
    const c = operatorTwin.get(client)!;
    const params = Object.fromEntries(authorizeUrl(t.url, c, { code_challenge_method: "plain" }).searchParams);
    const res = await postForm(`${t.url}/authorize`, params);
    expect(res.status).toBe(302);
    expect(redirectParams(res).params).toMatchObject({ error: "invalid_request", state: "st-123", iss: t.url });
    const page = await postForm(`${t.url}/authorize`, Object.fromEntries(authorizeUrl(t.url, client, { code_challenge_method: "plain" }).searchParams));
    expect(page.status).toBe(400);
    expect(page.headers.get("location")).toBeNull();
  });
});

describe("a valid request becomes a transaction bound to the browser", () => {
  const transaction = async (res: { headers: Headers }) => {
    const location = res.headers.get("location") ?? "";
    const id = new URL(location).searchParams.get("transaction")!;
    return t.broker.database.db.authTransaction.findUniqueOrThrow({ where: { id } });
  };

  it("stores the validated request (pending, 10 minutes) and sends the browser to the consent page", async () => {
    const { challenge } = pkcePair();
    const res = await send(authorizeUrl(t.url, client, { state: "xyz" }, challenge).href, { headers: { "mcp-protocol-version": "2025-06-18" } });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toMatch(new RegExp(`^${t.url}/consent\\?transaction=[A-Za-z0-9_-]+$`));
    expect(res.headers.get("set-cookie")).toMatch(/mab_session=/);
    const tx = await transaction(res);
    expect(tx).toMatchObject({
      clientId: client.client_id,
      redirectUri: client.redirect_uri,
      codeChallenge: challenge,
      codeChallengeMethod: "S256",
      resource: `${t.url}/mcp`,
      scope: "mcp",
      state: "xyz",
      status: "pending",
      protocolVersion: "2025-06-18",
    });
    expect(tx.browserSessionId).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(tx.expiresAt.getTime() - tx.createdAt.getTime()).toBeGreaterThan(595_000);
    expect(tx.expiresAt.getTime() - tx.createdAt.getTime()).toBeLessThanOrEqual(600_000);
  });

  it("binds a request without resource (2025-03-26 clients) to the default resource", async () => {
    const tx = await transaction(await send(authorizeUrl(t.url, client, { resource: undefined }).href));
    expect(tx.resource).toBe(`${t.url}/mcp`);
  });

  it.each([
    ["upper-case scheme and host", () => `HTTP://127.0.0.1:${new URL(t.url).port}/mcp`],
    ["a trailing slash", () => `${t.url}/mcp/`],
  ])("accepts a resource with %s and stores it canonical", async (_what, resource) => {
    const tx = await transaction(await send(authorizeUrl(t.url, client, { resource: resource() }).href));
    expect(tx.resource).toBe(`${t.url}/mcp`);
  });

  it.each([
    [undefined, "mcp"],
    ["", "mcp"],
    ["offline_access", "mcp offline_access"],
    ["mcp offline_access mcp", "mcp offline_access"],
  ])("normalizes scope %j to %j", async (scope, stored) => {
    const tx = await transaction(await send(authorizeUrl(t.url, client, { scope }).href));
    expect(tx.scope).toBe(stored);
  });

  it("uses the registered redirect URI when the client has exactly one and sent none", async () => {
    const tx = await transaction(await send(authorizeUrl(t.url, client, { redirect_uri: undefined }).href));
    expect(tx.redirectUri).toBe(client.redirect_uri);
  });

  it("matches a registered redirect URI that has a query, exactly", async () => {
    const tx = await transaction(await send(authorizeUrl(t.url, withQuery).href));
    expect(tx.redirectUri).toBe("https://app.example.com/cb?tenant=1");
  });

  it.each([
    ["127.0.0.1 on another port", "http://127.0.0.1:7777/callback", "http://127.0.0.1:51234/callback"],
    ["127.0.0.1 registered without a port", "http://127.0.0.1/callback", "http://127.0.0.1:40000/callback"],
    ["127.0.0.1 registered with a port, asked without", "http://127.0.0.1:33418/", "http://127.0.0.1/"],
    ["[::1] on another port", "http://[::1]:9000/cb", "http://[::1]:65535/cb"],
    ["localhost on another port, with the query kept", "http://localhost:8080/cb?x=1", "http://localhost:1/cb?x=1"],
  ])("matches a loopback redirect URI on any port (RFC 8252 §7.3): %s", async (_what, registered, asked) => {
    const c = await registerTestClient(t.url, { redirect_uris: [registered] });
    const tx = await transaction(await send(authorizeUrl(t.url, c, { redirect_uri: asked }).href));
    expect(tx.redirectUri).toBe(asked);
  });

  it.each([
    ["another loopback host", "http://127.0.0.1:7777/callback", "http://localhost:7777/callback"],
    ["another query", "http://localhost:8080/cb?x=1", "http://localhost:8081/cb?x=2"],
    ["an added query", "http://localhost:8080/cb", "http://localhost:8081/cb?x=2"],
    ["a non-loopback host on another port", "https://app.example.com/cb", "https://app.example.com:8443/cb"],
  ])("still refuses a loopback-like redirect URI with %s", async (_what, registered, asked) => {
    const c = await registerTestClient(t.url, { redirect_uris: [registered] });
    const res = await send(authorizeUrl(t.url, c, { redirect_uri: asked }).href);
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    expect(res.text).toContain("Unregistered redirect address");
  });

  it("accepts any registered redirect URI of a client with several", async () => {
    const tx = await transaction(await send(authorizeUrl(t.url, twoUris, { redirect_uri: "http://localhost:7778/b" }).href));
    expect(tx.redirectUri).toBe("http://localhost:7778/b");
  });

  it("accepts the request as a POST form too", async () => {
    const res = await postForm(`${t.url}/authorize`, Object.fromEntries(authorizeUrl(t.url, client).searchParams));
    expect(res.status).toBe(302);
    expect((await transaction(res)).status).toBe("pending");
  });
});

describe("resource canonicalization: the default port", () => {
  let b: TestBroker;
  let listenUrl: string;
  beforeAll(async () => {
    const port = await freePort();
    listenUrl = `http://127.0.0.1:${port}`;
    // PUBLIC_URL on the default port (as behind a proxy); the test talks to the real port.
    b = await startBroker({ PORT: String(port), PUBLIC_URL: "http://localhost", TRUST_PROXY: "true" });
  });
  afterAll(async () => b.stop());

  it.each(["http://localhost:80/mcp", "HTTP://LOCALHOST:80/mcp/", "http://localhost/mcp"])("treats %s as http://localhost/mcp", async (resource) => {
    const c = await registerTestClient(listenUrl);
    const res = await send(authorizeUrl(listenUrl, c, { resource }).href);
    expect(res.status).toBe(302);
    const id = new URL(res.headers.get("location")!).searchParams.get("transaction")!;
    const tx = await b.broker.database.db.authTransaction.findUniqueOrThrow({ where: { id } });
    expect(tx.resource).toBe("http://localhost/mcp");
  });

  it("refuses another port", async () => {
    const c = await registerOperatorClient(b.broker.database.db, {
      redirect_uris: ["http://127.0.0.1:7777/callback"],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    const res = await send(authorizeUrl(listenUrl, c, { resource: "http://localhost:8080/mcp" }).href);
    expect(redirectParams(res).params).toMatchObject({ error: "invalid_target", iss: "http://localhost" });
  });
});
