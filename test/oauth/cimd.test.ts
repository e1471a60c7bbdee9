// Client ID Metadata Documents over real HTTP: an https client_id whose document a test server
// publishes (throwaway CA, DNS answers injected: nothing leaves the machine), through /authorize,
// consent, the upstream login and /token; and every way a document is refused.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { ManualClock } from "../../src/lib/clock.ts";
import { freshnessMs, isMetadataDocumentUrl, MAX_FRESH_MS, MIN_FRESH_MS } from "../../src/grants/metadata-documents.ts";
import { authorize, redeemCode, tokenRequest } from "../support/oauth-flow.ts";
import { authorizeUrl, openConsent } from "../support/oauth-client.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { DOCUMENT_HOST, startDocumentServer, TRUSTED_HOST, type DocumentServer } from "../support/document-server.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { mcpStatus } from "../support/mcp-probe.ts";

const REDIRECT = "http://127.0.0.1:7777/callback";

function documentFor(clientId: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    client_id: clientId,
    client_name: "Docs Agent",
    client_uri: "https://apps.example.test/",
    redirect_uris: [REDIRECT],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: "none",
    ...extra,
  };
}

describe("client_id as a metadata document URL", () => {
  it.each([
    ["https://apps.example.test/client.json", true],
    ["https://apps.example.test:8443/a/b?x=1", true],
    ["https://apps.example.test/", false],
    ["https://apps.example.test", false],
    ["http://apps.example.test/client.json", false],
    ["https://user:pw@apps.example.test/client.json", false],
    ["https://apps.example.test/client.json#x", false],
    ["https://apps.example.test/a/../client.json", false],
    ["https://APPS.example.test/client.json", false],
    ["mab_c_abc", false],
  ])("%s → %s", (id, expected) => {
    expect(isMetadataDocumentUrl(id)).toBe(expected);
  });

  it("caches within one minute and one day, by Cache-Control, Age and Expires", () => {
    const now = Date.parse("2026-11-23T12:00:00Z");
    expect(freshnessMs({ "cache-control": "max-age=300" }, now)).toBe(300_000);
    expect(freshnessMs({ "cache-control": "public, max-age=300", age: "100" }, now)).toBe(200_000);
    expect(freshnessMs({ "cache-control": "max-age=300, s-maxage=600" }, now)).toBe(600_000);
    expect(freshnessMs({ "cache-control": "max-age=5" }, now)).toBe(MIN_FRESH_MS);
    expect(freshnessMs({ "cache-control": "no-store" }, now)).toBe(MIN_FRESH_MS);
    expect(freshnessMs({ "cache-control": "max-age=99999999" }, now)).toBe(MAX_FRESH_MS);
    expect(freshnessMs({ expires: "Mon, 23 Nov 2026 13:00:00 GMT", date: "Mon, 23 Nov 2026 12:00:00 GMT" }, now)).toBe(3600_000);
    expect(freshnessMs({}, now)).toBe(10 * 60_000);
  });
});

describe("Client ID Metadata Documents through the broker", () => {
  let docs: DocumentServer;
  let broker: TestBroker;
  const clock = new ManualClock();
  const stops: Array<() => Promise<void>> = [];

  async function brokerWith(env: Record<string, string> = {}, answers?: Record<string, string>): Promise<TestBroker> {
    const b = await startBroker({ CIMD_ALLOW_PRIVATE_NETWORKS: "true", ...env }, { clock, documentFetch: { lookup: docs.lookup(answers), ca: docs.caCert } });
    stops.push(() => b.stop());
    return b;
  }

  /** The /authorize answer for `clientId` in a fresh browser (no redirect followed). */
  async function startAuthorization(b: TestBroker, clientId: string): Promise<{ status: number; location: string | null; html: string }> {
    const res = await new HttpBrowser().request(authorizeUrl(b.url, { client_id: clientId, redirect_uri: REDIRECT }).href);
    return { status: res.status, location: res.headers.get("location"), html: await res.text() };
  }

  beforeAll(async () => {
    docs = await startDocumentServer();
    broker = await brokerWith({ CIMD_TRUSTED_HOSTS: TRUSTED_HOST });
  });
  afterAll(async () => {
    for (const stop of stops) await stop();
    await docs.close();
  });

  it("advertises client_id_metadata_document_supported", async () => {
    const meta = (await (await fetch(`${broker.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta.client_id_metadata_document_supported).toBe(true);
  });

  it("the whole flow: an https client_id, consent naming its host, tokens, refresh, /mcp", async () => {
    const clientId = `${docs.origin}/flow/client.json`;
    docs.json("/flow/client.json", documentFor(clientId), { "cache-control": "max-age=600" });
    const consent = await openConsent(authorizeUrl(broker.url, { client_id: clientId, redirect_uri: REDIRECT }));
    expect(consent.html).toContain('<span id="client-name">Docs Agent</span>');
    expect(consent.html).toMatch(new RegExp(`id="document-host">${DOCUMENT_HOST}:${docs.port}<`));
    expect(consent.html).toContain('id="unverified"');

    const client = { client_id: clientId, redirect_uri: REDIRECT };
    const { callback, verifier } = await authorize(broker.url, client, { user: "alice" });
    expect(callback.searchParams.get("code")).toBeTruthy();
    const token = await redeemCode(broker.url, client, { callback, verifier });
    expect(token.status).toBe(200);
    expect(await mcpStatus(broker.url, token.body.access_token as string)).toBe(200);
    const refreshed = await tokenRequest(broker.url, { grant_type: "refresh_token", refresh_token: token.body.refresh_token as string, client_id: clientId });
    expect(refreshed.status).toBe(200);

    const row = await broker.broker.database.db.client.findUniqueOrThrow({ where: { id: clientId } });
    expect(row).toMatchObject({ registrationType: "cimd", tokenEndpointAuthMethod: "none", secretHash: null, clientName: "Docs Agent" });
    const audit = await broker.broker.database.db.auditEvent.findMany({ where: { clientId, type: "client.registered" } });
    expect(audit).toHaveLength(1);
  });

  it("a host in CIMD_TRUSTED_HOSTS makes the client verified on the consent page", async () => {
    const clientId = `https://${TRUSTED_HOST}:${docs.port}/trusted/client.json`;
    docs.json("/trusted/client.json", documentFor(clientId, { client_name: "Trusted Agent" }));
    const consent = await openConsent(authorizeUrl(broker.url, { client_id: clientId, redirect_uri: REDIRECT }));
    expect(consent.html).toContain('id="verified"');
    expect(consent.html).not.toContain('id="unverified"');
    expect(consent.html).toContain(`id="document-host">${TRUSTED_HOST}:${docs.port}<`);
  });

  it("the document's redirect_uris rule the request", async () => {
    const clientId = `${docs.origin}/redirects/client.json`;
    docs.json("/redirects/client.json", documentFor(clientId, { redirect_uris: ["http://127.0.0.1:9999/elsewhere"] }));
    const res = await startAuthorization(broker, clientId);
    expect(res.status).toBe(400);
    expect(res.location).toBeNull();
    expect(res.html).toContain("Unregistered redirect address");
  });

  it.each([
    ["names another client_id", (id: string) => documentFor(`${id}-other`), "names another client_id"],
    [
      "is a confidential client",
      (id: string) => documentFor(id, { token_endpoint_auth_method: "client_secret_basic" }),
      "token_endpoint_auth_method is &quot;client_secret_basic&quot;",
    ],
    [
      "uses private_key_jwt without saying where its keys are",
      (id: string) => documentFor(id, { token_endpoint_auth_method: "private_key_jwt" }),
      "jwks_uri is required for token_endpoint_auth_method private_key_jwt",
    ],
    ["has no client_name", (id: string) => documentFor(id, { client_name: undefined }), "that document has no client_name"],
    ["has an empty client_name", (id: string) => documentFor(id, { client_name: " " }), "that document has no client_name"],
    ["carries a client_secret", (id: string) => documentFor(id, { client_secret: "s3cret" }), "contains a client_secret"],
    ["has no redirect_uris", (id: string) => documentFor(id, { redirect_uris: [] }), "redirect_uris is required"],
    [
      "asks for client_credentials",
      (id: string) => documentFor(id, { grant_types: ["client_credentials"], response_types: [] }),
      "self-registered clients cannot use",
    ],
    ["is an array", () => [1, 2], "not a JSON object"],
  ])("refuses a document that %s, with a page", async (_label, make, message) => {
    const path = `/bad/${Math.random().toString(36).slice(2)}.json`;
    const clientId = `${docs.origin}${path}`;
    docs.json(path, make(clientId));
    const res = await startAuthorization(broker, clientId);
    expect(res.status).toBe(400);
    expect(res.location).toBeNull();
    expect(res.html).toContain("This application could not be identified");
    expect(res.html).toContain(message);
    expect(await broker.broker.database.db.client.findUnique({ where: { id: clientId } })).toBeNull();
  });

  it.each([
    ["not JSON", (res: import("node:http").ServerResponse) => res.writeHead(200, { "content-type": "text/html" }).end("<h1>hi</h1>"), "is not JSON"],
    [
      "too large",
      (res: import("node:http").ServerResponse) => res.writeHead(200, { "content-type": "application/json" }).end(`{"pad":"${"x".repeat(40_000)}"}`),
      "larger than",
    ],
    [
      "a redirect",
      (res: import("node:http").ServerResponse) => res.writeHead(302, { location: "https://apps.example.test/elsewhere.json" }).end(),
      "redirects are not followed",
    ],
    ["a server error", (res: import("node:http").ServerResponse) => res.writeHead(500).end(), "HTTP status 500"],
  ])("refuses an answer that is %s", async (_label, route, message) => {
    const path = `/odd/${Math.random().toString(36).slice(2)}.json`;
    docs.route(path, (_req, res) => route(res));
    const res = await startAuthorization(broker, `${docs.origin}${path}`);
    expect(res.status).toBe(400);
    expect(res.location).toBeNull();
    expect(res.html).toContain(message);
  });

  it("caches the document as its headers say, fetches it again when stale, and stops at 404/410", async () => {
    const path = "/cache/client.json";
    const clientId = `${docs.origin}${path}`;
    docs.json(path, documentFor(clientId, { client_name: "Version 1" }), { "cache-control": "max-age=120" });
    const fetches = () => docs.requests.filter((r) => r === `GET ${path}`).length;

    expect((await startAuthorization(broker, clientId)).status).toBe(302);
    expect((await startAuthorization(broker, clientId)).status).toBe(302);
    expect(fetches()).toBe(1);

    docs.json(path, documentFor(clientId, { client_name: "Version 2" }), { "cache-control": "max-age=120" });
    clock.advance(60_000);
    expect((await startAuthorization(broker, clientId)).status).toBe(302);
    expect(fetches()).toBe(1);
    clock.advance(61_000);
    expect((await startAuthorization(broker, clientId)).status).toBe(302);
    expect(fetches()).toBe(2);
    expect((await broker.broker.database.db.client.findUniqueOrThrow({ where: { id: clientId } })).clientName).toBe("Version 2");

    // Gone: no new authorization, from the first request after the cached copy went stale.
    docs.route(path, (_req, res) => res.writeHead(410).end());
    expect((await startAuthorization(broker, clientId)).status).toBe(302);
    clock.advance(121_000);
    const gone = await startAuthorization(broker, clientId);
    expect(gone.status).toBe(400);
    expect(gone.location).toBeNull();
    expect(gone.html).toContain("that document is gone (HTTP 410)");
    docs.route(path, (_req, res) => res.writeHead(404).end());
    expect((await startAuthorization(broker, clientId)).html).toContain("gone (HTTP 404)");
  });

  it("SSRF: a client_id whose name resolves to loopback, metadata or private addresses is refused without a connection", async () => {
    const guarded = await brokerWith({ CIMD_ALLOW_PRIVATE_NETWORKS: "false" }, { [DOCUMENT_HOST]: "127.0.0.1" });
    const clientId = `${docs.origin}/ssrf/client.json`;
    docs.json("/ssrf/client.json", documentFor(clientId));
    const before = docs.connections;
    const res = await startAuthorization(guarded, clientId);
    expect(res.status).toBe(400);
    expect(res.html).toContain(`${DOCUMENT_HOST} resolves to 127.0.0.1, a private, loopback or link-local address`);
    for (const address of ["169.254.169.254", "10.0.0.7"]) {
      const other = await brokerWith({ CIMD_ALLOW_PRIVATE_NETWORKS: "false" }, { [DOCUMENT_HOST]: address });
      const r = await startAuthorization(other, clientId);
      expect(r.status).toBe(400);
      expect(r.html).toContain(`resolves to ${address}`);
    }
    const literal = await startAuthorization(guarded, `https://127.0.0.1:${docs.port}/ssrf/client.json`);
    expect(literal.html).toContain("127.0.0.1 is a private, loopback or link-local address");
    expect(docs.connections).toBe(before);
  });

  it("CIMD=false: an https client_id is an unknown application, and the metadata says nothing", async () => {
    const off = await brokerWith({ CIMD: "false" });
    const clientId = `${docs.origin}/off/client.json`;
    docs.json("/off/client.json", documentFor(clientId));
    const before = docs.requests.length;
    const res = await startAuthorization(off, clientId);
    expect(res.status).toBe(400);
    expect(res.html).toContain("Unknown application");
    expect(docs.requests.length).toBe(before);
    const meta = (await (await fetch(`${off.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(meta.client_id_metadata_document_supported).toBeUndefined();
  });

  it("DYNAMIC_REGISTRATION=false: metadata-document clients still connect", async () => {
    const closed = await brokerWith({ DYNAMIC_REGISTRATION: "false" });
    const clientId = `${docs.origin}/closed/client.json`;
    docs.json("/closed/client.json", documentFor(clientId));
    expect((await fetch(`${closed.url}/register`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).not.toBe(201);
    const { callback } = await authorize(closed.url, { client_id: clientId, redirect_uri: REDIRECT });
    expect(callback.searchParams.get("code")).toBeTruthy();
  });
});
