// RFC 7591 dynamic client registration at /register.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { displayPrefix, sha256Hex } from "../../src/crypto/tokens.ts";
import { ClientRegistry } from "../../src/grants/clients.ts";
import { parseClientMetadata } from "../../src/grants/client-metadata.ts";
import { REGISTRATION_RATE_LIMIT } from "../../src/grants/rate-limit.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorizeUrl, basicAuth, countRows, freshIp, postForm, postJson, send, tamper } from "../support/oauth-client.ts";

let t: TestBroker;
let closed: TestBroker;
let noAppSchemes: TestBroker;
beforeAll(async () => {
  [t, closed, noAppSchemes] = await Promise.all([
    startBroker({ TRUST_PROXY: "true" }),
    startBroker({ DYNAMIC_REGISTRATION: "false" }),
    startBroker({ TRUST_PROXY: "true", ALLOW_APP_SCHEME_REDIRECTS: "false" }),
  ]);
});
afterAll(async () => Promise.all([t.stop(), closed.stop(), noAppSchemes.stop()]));

const register = (body: unknown, url = t.url) => postJson(`${url}/register`, body, { "x-forwarded-for": freshIp() });
const publicClient = { redirect_uris: ["http://127.0.0.1:9999/callback"], token_endpoint_auth_method: "none" };

describe("successful registration", () => {
  it("registers a public client: 201, JSON, the metadata echoed, no secret", async () => {
    const res = await register({
      ...publicClient,
      client_name: "Inspector",
      client_uri: "https://inspector.example.com",
      logo_uri: "https://inspector.example.com/logo.png",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      scope: "mcp",
    });
    expect(res.status).toBe(201);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.json).toMatchObject({
      redirect_uris: ["http://127.0.0.1:9999/callback"],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      client_name: "Inspector",
      client_uri: "https://inspector.example.com",
      logo_uri: "https://inspector.example.com/logo.png",
      scope: "mcp",
    });
    expect(res.json!.client_id).toMatch(/^mab_c_[A-Za-z0-9_-]{22,}$/);
    expect(res.json).not.toHaveProperty("client_secret");
    expect(Math.abs((res.json!.client_id_issued_at as number) - Date.now() / 1000)).toBeLessThan(60);
    const row = await t.broker.database.db.client.findUniqueOrThrow({ where: { id: res.json!.client_id as string } });
    expect(row).toMatchObject({ registrationType: "dynamic", secretHash: null, clientName: "Inspector" });
  });

  it("defaults token_endpoint_auth_method to client_secret_basic (RFC 7591 §2) and returns a 256-bit secret once", async () => {
    const res = await register({ redirect_uris: ["https://app.example.com/cb"] });
    expect(res.status).toBe(201);
    expect(res.json!.token_endpoint_auth_method).toBe("client_secret_basic");
    // Without grant_types: what MCP clients expect (RFC 7591 §3.2.1), and the response says so.
    expect(res.json!.grant_types).toEqual(["authorization_code", "refresh_token"]);
    expect(res.json!.response_types).toEqual(["code"]);
    const secret = res.json!.client_secret as string;
    expect(secret).toMatch(/^mab_cs_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(secret.slice("mab_cs_".length), "base64url")).toHaveLength(32);
    expect(res.json!.client_secret_expires_at).toBe(0);
    const row = await t.broker.database.db.client.findUniqueOrThrow({ where: { id: res.json!.client_id as string } });
    // Stored only as a hash (and a short display prefix): the secret itself is nowhere in the row.
    expect(row.secretHash).toBe(sha256Hex(secret));
    expect(row.secretPrefix).toBe(displayPrefix(secret));
    expect(JSON.stringify(row)).not.toContain(secret);
    // Nothing reads a registration back (no RFC 7592 endpoint).
    const readBack = await send(`${t.url}/register?client_id=${encodeURIComponent(res.json!.client_id as string)}`);
    expect(readBack.status).toBe(405);
    expect(readBack.text).not.toContain(secret);
  });

  it("gives every client its own id and secret", async () => {
    const body = { redirect_uris: ["https://app.example.com/cb"], token_endpoint_auth_method: "client_secret_post" };
    const [a, b] = await Promise.all([register(body), register(body)]);
    expect(a.json!.client_id).not.toBe(b.json!.client_id);
    expect(a.json!.client_secret).not.toBe(b.json!.client_secret);
  });

  it("issues secrets that authenticate at the token endpoint by the registered method only", async () => {
    const basic = await register({
      redirect_uris: ["https://app.example.com/cb"],
      grant_types: ["authorization_code", "refresh_token"],
      token_endpoint_auth_method: "client_secret_basic",
    });
    expect(basic.status).toBe(201);
    const id = basic.json!.client_id as string;
    const secret = basic.json!.client_secret as string;
    // Authenticated, the made-up refresh token is what fails (400); unauthenticated, the client (401).
    const form = { grant_type: "refresh_token", refresh_token: "mab_rt_unknown" };
    const ok = await postForm(`${t.url}/token`, form, { authorization: basicAuth(id, secret) });
    expect(ok.status).toBe(400);
    expect(ok.json!.error).toBe("invalid_grant");
    const wrong = await postForm(`${t.url}/token`, form, { authorization: basicAuth(id, tamper(secret)) });
    expect(wrong.status).toBe(401);
    const post = await postForm(`${t.url}/token`, { ...form, client_id: id, client_secret: secret });
    expect(post.status).toBe(401);
  });

  it("ignores unknown fields", async () => {
    const res = await register({ ...publicClient, jwks_uri: "https://x.example/jwks", custom_field: { a: 1 }, tos_uri: "https://x.example/tos" });
    expect(res.status).toBe(201);
    expect(res.json).not.toHaveProperty("custom_field");
    expect(res.json).not.toHaveProperty("jwks_uri");
  });

  it("accepts a client_name of 200 characters", async () => {
    const res = await register({ ...publicClient, client_name: "n".repeat(200) });
    expect(res.status).toBe(201);
  });
});

describe("redirect URIs", () => {
  it.each([
    "https://app.example.com/callback",
    "https://app.example.com/callback?tenant=1",
    "https://app.example.com:8443/cb",
    "http://localhost/cb",
    "http://localhost:8080/oauth/callback",
    "http://127.0.0.1:33418/",
    "http://127.0.0.1/cb",
    "http://[::1]:9000/cb",
  ])("accepts %s", async (uri) => {
    const res = await register({ redirect_uris: [uri], token_endpoint_auth_method: "none" });
    expect(res.status).toBe(201);
    expect(res.json!.redirect_uris).toEqual([uri]);
  });

  it.each([
    ["plain http on a public host", "http://example.com/cb"],
    ["a host that only starts with localhost", "http://localhost.evil.example/cb"],
    ["a host that only starts with 127.0.0.1", "http://127.0.0.1.nip.io/cb"],
    ["a fragment", "https://app.example.com/cb#top"],
    ["an empty fragment", "https://app.example.com/cb#"],
    ["a relative path", "/callback"],
    ["a bare word", "callback"],
    ["an empty string", ""],
    ["javascript:", "javascript:alert(1)"],
    ["JavaScript: in mixed case", "JavaScript://x/%0Aalert(1)"],
    ["vbscript:", "vbscript:msgbox(1)"],
    ["data:", "data:text/html,<script>alert(1)</script>"],
    ["blob:", "blob:https://app.example.com/1234"],
    ["about:", "about:blank"],
    ["file:", "file:///etc/passwd"],
    ["ws:", "ws://127.0.0.1:9000/cb"],
    ["wss:", "wss://app.example.com/cb"],
    ["ftp:", "ftp://files.example.com/cb"],
    ["an app scheme with userinfo", "cursor://user:pw@anysphere.cursor-mcp/cb"],
    ["leading whitespace", " https://app.example.com/cb"],
    ["a control character", "https://app.example.com/c\u0000b"],
    ["a non-string", 42],
  ])("rejects %s with invalid_redirect_uri", async (_what, uri) => {
    const before = await countRows(t.broker.database.db);
    const res = await register({ redirect_uris: ["https://ok.example.com/cb", uri], token_endpoint_auth_method: "none" });
    expect(res.status).toBe(400);
    expect(res.json!.error).toBe("invalid_redirect_uri");
    expect(typeof res.json!.error_description).toBe("string");
    expect(await countRows(t.broker.database.db)).toEqual(before);
  });

  it.each([
    "cursor://anysphere.cursor-mcp/oauth/callback",
    "vscode://vscode.github-authentication/did-authenticate",
    "com.example.app:/cb",
    "com.example.app:/oauth2redirect?x=1",
  ])("accepts the app scheme %s for a public client (RFC 8252 §7.1)", async (uri) => {
    const res = await register({ redirect_uris: [uri], token_endpoint_auth_method: "none" });
    expect(res.status).toBe(201);
    expect(res.json!.redirect_uris).toEqual([uri]);
  });

  it("accepts Cursor's registration: an app scheme and a loopback URI in one request", async () => {
    const uris = ["cursor://anysphere.cursor-mcp/oauth/callback", "http://127.0.0.1:51234/callback"];
    const res = await register({ redirect_uris: uris, token_endpoint_auth_method: "none" });
    expect(res.status).toBe(201);
    expect(res.json!.redirect_uris).toEqual(uris);
  });

  it("refuses app schemes for confidential clients, naming the URI", async () => {
    const res = await register({
      redirect_uris: ["https://ok.example.com/cb", "cursor://anysphere.cursor-mcp/oauth/callback"],
      token_endpoint_auth_method: "client_secret_basic",
    });
    expect(res.status).toBe(400);
    expect(res.json!.error).toBe("invalid_redirect_uri");
    expect(res.json!.error_description).toContain('"cursor://anysphere.cursor-mcp/oauth/callback"');
    expect(res.json!.error_description).not.toContain("ok.example.com");
  });

  it("refuses app schemes when ALLOW_APP_SCHEME_REDIRECTS=false, and still takes loopback and https", async () => {
    const refused = await register({ redirect_uris: ["cursor://anysphere.cursor-mcp/oauth/callback"], token_endpoint_auth_method: "none" }, noAppSchemes.url);
    expect(refused.status).toBe(400);
    expect(refused.json!.error).toBe("invalid_redirect_uri");
    expect(refused.json!.error_description).toContain("cursor://anysphere.cursor-mcp/oauth/callback");
    const ok = await register({ redirect_uris: ["http://127.0.0.1:9/cb", "https://a.example/cb"], token_endpoint_auth_method: "none" }, noAppSchemes.url);
    expect(ok.status).toBe(201);
  });

  it("names every refused URI of a registration, and only those", async () => {
    const res = await register({
      redirect_uris: ["http://127.0.0.1:9/cb", "javascript:alert(1)", "cursor://anysphere.cursor-mcp/oauth/callback", "http://example.com/cb"],
      token_endpoint_auth_method: "none",
    });
    expect(res.status).toBe(400);
    const text = res.json!.error_description as string;
    expect(text).toContain('"javascript:alert(1)"');
    expect(text).toContain('"http://example.com/cb"');
    expect(text).not.toContain("cursor://");
    expect(text).not.toContain("127.0.0.1:9");
  });

  it("requires redirect URIs for the authorization_code grant", async () => {
    for (const body of [{ token_endpoint_auth_method: "none" }, { redirect_uris: [], token_endpoint_auth_method: "none" }]) {
      const res = await register(body);
      expect(res.status).toBe(400);
      expect(res.json!.error).toBe("invalid_redirect_uri");
    }
  });
});

describe("client metadata rules", () => {
  it.each([
    ["an unknown grant type", { ...publicClient, grant_types: ["password"] }],
    ["the implicit grant", { ...publicClient, grant_types: ["implicit"], response_types: ["token"] }],
    ["a response type other than code", { ...publicClient, response_types: ["token"] }],
    ["authorization_code without response type code", { ...publicClient, grant_types: ["authorization_code"], response_types: [] }],
    ["response type code without authorization_code", { ...publicClient, grant_types: ["refresh_token"], response_types: ["code"] }],
    ["refresh_token alone", { token_endpoint_auth_method: "client_secret_basic", grant_types: ["refresh_token"], response_types: [] }],
    ["client_credentials for a public client", { token_endpoint_auth_method: "none", grant_types: ["client_credentials"] }],
    [
      "client_credentials for a confidential client (only the operator makes machine clients)",
      { token_endpoint_auth_method: "client_secret_basic", grant_types: ["client_credentials"], response_types: [] },
    ],
    [
      "client_credentials beside the code grant",
      {
        redirect_uris: ["https://a.example/cb"],
        token_endpoint_auth_method: "client_secret_basic",
        grant_types: ["authorization_code", "refresh_token", "client_credentials"],
      },
    ],
    ["a client_name with a NUL byte", { ...publicClient, client_name: "a\u0000b" }],
    ["a client_name with a line break", { ...publicClient, client_name: "a\nb" }],
    ["a software_id with a control character", { ...publicClient, software_id: "x\u0007" }],
    ["an unsupported auth method", { ...publicClient, token_endpoint_auth_method: "private_key_jwt" }],
    ["grant_types that is not an array", { ...publicClient, grant_types: "authorization_code" }],
    ["a client_name over 200 characters", { ...publicClient, client_name: "n".repeat(201) }],
    ["a client_name that is not a string", { ...publicClient, client_name: { en: "x" } }],
    ["an empty client_name", { ...publicClient, client_name: "   " }],
    ["an http logo_uri", { ...publicClient, logo_uri: "http://cdn.example.com/logo.png" }],
    ["an http logo_uri on loopback", { ...publicClient, logo_uri: "http://localhost/logo.png" }],
    ["a data: logo_uri", { ...publicClient, logo_uri: "data:image/png;base64,AAAA" }],
    ["a javascript: client_uri", { ...publicClient, client_uri: "javascript:alert(1)" }],
    ["an http client_uri", { ...publicClient, client_uri: "http://app.example.com" }],
    ["a scope that is not a string", { ...publicClient, scope: ["mcp"] }],
  ])("rejects %s with invalid_client_metadata", async (_what, body) => {
    const before = await countRows(t.broker.database.db);
    const res = await register(body);
    expect(res.status).toBe(400);
    expect(res.json!.error).toBe("invalid_client_metadata");
    expect(res.json!.error_description).toEqual(expect.any(String));
    expect(await countRows(t.broker.database.db)).toEqual(before);
  });

  it("accepts consistent combinations", async () => {
    const post = await register({
      redirect_uris: ["https://a.example/cb"],
      token_endpoint_auth_method: "client_secret_post",
      grant_types: ["authorization_code"],
    });
    expect(post.status).toBe(201);
    const all = await register({
      redirect_uris: ["https://a.example/cb"],
      token_endpoint_auth_method: "client_secret_basic",
      grant_types: ["authorization_code", "refresh_token"],
    });
    expect(all.status).toBe(201);
    expect(all.json!.grant_types).toEqual(["authorization_code", "refresh_token"]);
  });

  it.each([
    ["an unknown scope beside a known one", "mcp claudeai", "mcp"],
    ["known scopes, unordered and repeated", "offline_access mcp mcp", "mcp offline_access"],
    // Nothing known asked: no restriction stored; the response lists what the client may ask for.
    ['only unknown scopes (claude.ai\'s "claudeai")', "claudeai", "mcp offline_access"],
  ])("drops unknown scopes instead of failing (RFC 7591 §3.2.1): %s", async (_what, asked, granted) => {
    const res = await register({ ...publicClient, scope: asked });
    expect(res.status).toBe(201);
    expect(res.json!.scope).toBe(granted);
    const row = await t.broker.database.db.client.findUniqueOrThrow({ where: { id: res.json!.client_id as string } });
    expect(row.scope).toBe(granted === "mcp offline_access" && asked === "claudeai" ? null : granted);
  });

  it("wants JSON", async () => {
    const form = await postForm(`${t.url}/register`, { redirect_uris: "https://a.example/cb" }, { "x-forwarded-for": freshIp() });
    expect(form.status).toBe(400);
    expect(form.json!.error).toBe("invalid_client_metadata");
    const broken = await postJson(`${t.url}/register`, "{ not json", { "x-forwarded-for": freshIp() });
    expect(broken.status).toBe(400);
    expect(broken.json!.error).toBe("invalid_client_metadata");
  });
});

describe("switched off (DYNAMIC_REGISTRATION=false)", () => {
  it("refuses registrations with an OAuth error and stores nothing", async () => {
    const before = await countRows(closed.broker.database.db);
    const res = await postJson(`${closed.url}/register`, publicClient);
    expect(res.status).toBe(403);
    expect(res.json!.error).toBe("access_denied");
    expect(res.json!.error_description).toMatch(/clients add/);
    expect(await countRows(closed.broker.database.db)).toEqual(before);
  });

  it("still serves clients the operator registered (the CLI's way: ClientRegistry with the same metadata rules)", async () => {
    const registry = new ClientRegistry(closed.broker.database.db);
    const { client } = await registry.register(parseClientMetadata({ ...publicClient, client_name: "Operator's client" }, "manual"), "manual");
    const res = await send(authorizeUrl(closed.url, { client_id: client.id, redirect_uri: publicClient.redirect_uris[0]! }).href);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toContain("/consent?transaction=");
  });
});

describe("rate limit per IP", () => {
  const limit = REGISTRATION_RATE_LIMIT.burst;

  it(`allows a burst of ${limit} registrations from one address, then answers 429 with Retry-After`, async () => {
    const ip = freshIp();
    const before = await countRows(t.broker.database.db);
    let accepted = 0;
    let limited: Awaited<ReturnType<typeof postJson>> | undefined;
    while (limited === undefined && accepted <= 2 * limit) {
      const res = await postJson(`${t.url}/register`, publicClient, { "x-forwarded-for": ip });
      if (res.status === 201) accepted++;
      else limited = res;
    }
    // The bucket refills at 60 a minute, so a few more may pass while the burst is being sent.
    expect(accepted).toBeGreaterThanOrEqual(limit);
    expect(accepted).toBeLessThan(limit + 10);
    expect(limited!.status).toBe(429);
    expect(limited!.json!.error).toEqual(expect.any(String));
    const retry = Number(limited!.headers.get("retry-after"));
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    // The refused registration left nothing behind.
    expect((await countRows(t.broker.database.db)).client).toBe(before.client + accepted);
    // Another address (TRUST_PROXY=true: the forwarded one) is not affected.
    expect((await postJson(`${t.url}/register`, publicClient, { "x-forwarded-for": freshIp() })).status).toBe(201);
  });

  it("counts by the socket address when TRUST_PROXY is off, whatever X-Forwarded-For says", async () => {
    const statuses: number[] = [];
    // More than the burst: the bucket refills (60 a minute) while these are sent.
    for (let i = 0; i <= limit + 20; i++) statuses.push((await postJson(`${closed.url}/register`, publicClient, { "x-forwarded-for": freshIp() })).status);
    // Earlier tests in this file used some of this address's budget too.
    const first429 = statuses.indexOf(429);
    expect(first429).toBeGreaterThan(0);
    expect(statuses.slice(0, first429).every((s) => s === 403)).toBe(true);
  });
});
