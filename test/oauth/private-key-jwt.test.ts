// private_key_jwt for the clients an operator registers (`clients add --jwks-file | --jwks-uri`) and
// for self-registered ones (jwks_uri or jwks at /register): a machine client driven by the MCP
// SDK's own PrivateKeyJwtProvider (client_credentials, aud = the issuer, no client_id in the form),
// the code flow with /revoke and /introspect, the key set's cache and its re-fetch on an unknown
// kid (never more often than every 30 s), the SSRF guard on jwks_uri, and the registrations and
// requests that cannot work, each refused with a clear error.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { exportPKCS8 } from "jose";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { PrivateKeyJwtProvider } from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { ManualClock } from "../../src/lib/clock.ts";
import { MIN_REFETCH_MS } from "../../src/grants/client-keys.ts";
import { startDocumentServer, DOCUMENT_HOST, type DocumentServer } from "../support/document-server.ts";
import { authorize } from "../support/oauth-flow.ts";
import { basicAuth, postForm, postJson, freshIp } from "../support/oauth-client.ts";
import { brokerCliEnv, runCliCaptured, type CliResult } from "../support/cli-in-process.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { assertionClaims, assertionForm, keySet, sign, signingKey, type SigningKey } from "../support/client-assertion.ts";

/** The CLI in-process against `b`'s database. */
const cli = (b: TestBroker, args: string[]): Promise<CliResult> => runCliCaptured(args, { cwd: b.dir, env: brokerCliEnv(b) });

/** `clients add … --json` that must succeed: the client's id. */
async function addClient(b: TestBroker, args: string[]): Promise<{ clientId: string; clientSecret: string | null; tokenEndpointAuthMethod: string }> {
  const added = await cli(b, ["clients", "add", ...args, "--json"]);
  if (added.code !== 0) throw new Error(`clients add failed: ${added.stderr}`);
  return JSON.parse(added.stdout) as { clientId: string; clientSecret: string | null; tokenEndpointAuthMethod: string };
}

function keyFile(contents: unknown): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), "mab-jwks-")), "keys.json");
  writeFileSync(file, JSON.stringify(contents));
  return file;
}

/** The answer a refused client authentication gets. */
function refusedClient(res: { status: number; headers: Headers; json?: Record<string, unknown> | undefined }, reason: RegExp): void {
  expect([res.status, res.json?.error]).toEqual([401, "invalid_client"]);
  expect(res.headers.get("www-authenticate")).toMatch(/^Basic /);
  expect(res.json?.error_description).toMatch(reason);
}

describe("private_key_jwt for operator-registered and self-registered clients", () => {
  let docs: DocumentServer;
  let broker: TestBroker;

  beforeAll(async () => {
    docs = await startDocumentServer();
    broker = await startBroker({ CIMD_ALLOW_PRIVATE_NETWORKS: "true", TRUST_PROXY: "true" }, { documentFetch: { lookup: docs.lookup(), ca: docs.caCert } });
  });
  afterAll(async () => {
    await broker.stop();
    await docs.close();
  });

  it("clients add --jwks-file: a machine client of the MCP SDK (PrivateKeyJwtProvider, ES256, no kid) gets a token and calls a tool", async () => {
    const key = await signingKey(undefined, "ES256");
    const added = await addClient(broker, ["--name", "Nightly job", "--grant-type", "client_credentials", "--jwks-file", keyFile(keySet(key))]);
    expect(added).toMatchObject({ tokenEndpointAuthMethod: "private_key_jwt", clientSecret: null });
    const provider = new PrivateKeyJwtProvider({
      clientId: added.clientId,
      privateKey: await exportPKCS8(key.privateKey),
      algorithm: "ES256",
      expectedIssuer: broker.url,
    });
    const client = new Client({ name: "nightly", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { authProvider: provider });
    await client.connect(transport);
    try {
      const result = (await client.callTool({ name: "whoami", arguments: {} })) as { content: Array<{ text: string }> };
      expect(JSON.parse(result.content[0]!.text)).toMatchObject({ subject: `client:${added.clientId}`, clientId: added.clientId });
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
    expect((await cli(broker, ["clients", "show", added.clientId])).stdout).toMatch(/keys: +registered key set \(1 key\)/);
  });

  it("clients add --jwks-uri: the code flow, then /introspect and /revoke, each with an assertion", async () => {
    const key = await signingKey();
    docs.json("/ops/jwks.json", keySet(key));
    const added = await addClient(broker, [
      "--name",
      "Ops console",
      "--redirect-uri",
      "http://127.0.0.1:7777/callback",
      "--jwks-uri",
      `${docs.origin}/ops/jwks.json`,
    ]);
    expect(added).toMatchObject({ tokenEndpointAuthMethod: "private_key_jwt", clientSecret: null });
    const { callback, verifier } = await authorize(broker.url, { client_id: added.clientId, redirect_uri: "http://127.0.0.1:7777/callback" }, { user: "olga" });
    // aud the issuer, no client_id in the form (RFC 7523 §3: the assertion's sub names the client).
    const assertion = () => sign(key, assertionClaims(added.clientId, broker.url));
    const token = await postForm(`${broker.url}/token`, {
      grant_type: "authorization_code",
      code: callback.searchParams.get("code")!,
      redirect_uri: "http://127.0.0.1:7777/callback",
      code_verifier: verifier,
      ...assertionForm(await assertion()),
    });
    expect(token.status).toBe(200);
    const access = token.json!.access_token as string;
    // aud the endpoint it is sent to.
    const at = (endpoint: string) => sign(key, assertionClaims(added.clientId, `${broker.url}/${endpoint}`));
    expect((await postForm(`${broker.url}/introspect`, { token: access, ...assertionForm(await at("introspect")) })).json).toMatchObject({
      active: true,
      client_id: added.clientId,
      sub: "demo:olga",
    });
    refusedClient(await postForm(`${broker.url}/introspect`, { token: access, client_id: added.clientId }), /authenticates with private_key_jwt/);
    expect((await postForm(`${broker.url}/revoke`, { token: access, ...assertionForm(await at("revoke")) })).status).toBe(200);
    expect((await postForm(`${broker.url}/introspect`, { token: access, ...assertionForm(await assertion()) })).json).toEqual({ active: false });
  });

  it("/register: private_key_jwt with its key set inline (jwks), and no secret", async () => {
    const key = await signingKey();
    const inline = await postJson(
      `${broker.url}/register`,
      {
        client_name: "Signed agent",
        redirect_uris: ["http://127.0.0.1:7777/callback"],
        token_endpoint_auth_method: "private_key_jwt",
        token_endpoint_auth_signing_alg: "RS256",
        jwks: keySet(key),
      },
      { "x-forwarded-for": freshIp() },
    );
    expect(inline.status).toBe(201);
    expect(inline.json).toMatchObject({ token_endpoint_auth_method: "private_key_jwt", token_endpoint_auth_signing_alg: "RS256", jwks: keySet(key) });
    expect(inline.json).not.toHaveProperty("client_secret");
    const clientId = inline.json!.client_id as string;
    const { callback, verifier } = await authorize(broker.url, { client_id: clientId, redirect_uri: "http://127.0.0.1:7777/callback" });
    const token = await postForm(`${broker.url}/token`, {
      grant_type: "authorization_code",
      code: callback.searchParams.get("code")!,
      redirect_uri: "http://127.0.0.1:7777/callback",
      code_verifier: verifier,
      client_id: clientId,
      ...assertionForm(await sign(key, assertionClaims(clientId, `${broker.url}/token`))),
    });
    expect(token.status).toBe(200);
    // Its registration names RS256: an ES256 assertion (with a key it does not have anyway) is refused for its algorithm.
    const es = await signingKey(key.kid, "ES256");
    refusedClient(
      await postForm(`${broker.url}/token`, {
        grant_type: "client_credentials",
        client_id: clientId,
        ...assertionForm(await sign(es, assertionClaims(clientId, broker.url))),
      }),
      /its registration names RS256/,
    );
  });

  it.each<[string, Record<string, unknown>, string, RegExp]>([
    ["no keys", {}, "invalid_client_metadata", /jwks_uri is required/],
    [
      "both jwks and jwks_uri",
      { jwks: { keys: [] }, jwks_uri: "https://apps.example.test/jwks.json" },
      "invalid_client_metadata",
      /jwks and jwks_uri are both present/,
    ],
    ["an http jwks_uri", { jwks_uri: "http://apps.example.test/jwks.json" }, "invalid_client_metadata", /jwks_uri is invalid: must be an https URL/],
    [
      "a private key in jwks",
      { jwks: { keys: [{ kty: "EC", crv: "P-256", x: "x", y: "y", d: "secret" }] } },
      "invalid_client_metadata",
      /holds private key material/,
    ],
    ["a symmetric key in jwks", { jwks: { keys: [{ kty: "oct", k: "c2VjcmV0" }] } }, "invalid_client_metadata", /symmetric key/],
    ["an empty key set", { jwks: { keys: [] } }, "invalid_client_metadata", /no public signing key/],
    [
      "HS256 as its signing algorithm",
      { jwks_uri: "https://apps.example.test/jwks.json", token_endpoint_auth_signing_alg: "HS256" },
      "invalid_client_metadata",
      /token_endpoint_auth_signing_alg is "HS256"/,
    ],
  ])("/register refuses private_key_jwt with %s, naming the field", async (_label, extra, error, reason) => {
    const res = await postJson(
      `${broker.url}/register`,
      { client_name: "Bad", redirect_uris: ["http://127.0.0.1:7777/callback"], token_endpoint_auth_method: "private_key_jwt", ...extra },
      { "x-forwarded-for": freshIp() },
    );
    expect([res.status, res.json?.error]).toEqual([400, error]);
    expect(res.json?.error_description).toMatch(reason);
  });

  it("clients add refuses keys that cannot work, with a clear message and exit code 2", async () => {
    const secretKey = await signingKey();
    const withPrivate = { keys: [{ ...secretKey.jwk, d: "private-part" }] };
    const cases: Array<[string[], RegExp]> = [
      [["--jwks-file", keyFile(withPrivate)], /invalid client: jwks is invalid: the key set holds private key material/],
      [["--jwks-file", path.join(tmpdir(), "no-such-keys.json")], /cannot read --jwks-file .*ENOENT/],
      [["--jwks-file", keyFile("not a key set")], /jwks is invalid: the key set is not a JWK Set/],
      [["--public", "--jwks-uri", "https://apps.example.test/jwks.json"], /--public and --jwks-uri\/--jwks-file exclude each other/],
      [["--jwks-uri", "https://a.example/k.json", "--jwks-file", keyFile(keySet(secretKey))], /--jwks-uri or --jwks-file, not both/],
      [["--auth-method", "private_key_jwt"], /jwks_uri is required/],
    ];
    for (const [args, message] of cases) {
      const res = await cli(broker, ["clients", "add", "--name", "Bad", "--grant-type", "client_credentials", ...args]);
      expect([res.code, res.stderr]).toEqual([2, expect.stringMatching(message)]);
    }
  });

  it("one authentication method per request; a client_assertion_type of its own is refused", async () => {
    const key = await signingKey();
    const added = await addClient(broker, ["--name", "Strict job", "--grant-type", "client_credentials", "--jwks-file", keyFile(keySet(key))]);
    const assertion = await sign(key, assertionClaims(added.clientId, broker.url));
    const form = { grant_type: "client_credentials", ...assertionForm(assertion) };
    refusedClient(await postForm(`${broker.url}/token`, { ...form, client_secret: "s" }), /one client authentication method/);
    refusedClient(await postForm(`${broker.url}/token`, form, { authorization: basicAuth(added.clientId, "s") }), /one client authentication method/);
    refusedClient(
      await postForm(`${broker.url}/token`, { ...form, client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:saml2-bearer" }),
      /client_assertion_type must be urn:ietf:params:oauth:client-assertion-type:jwt-bearer/,
    );
    refusedClient(await postForm(`${broker.url}/token`, { grant_type: "client_credentials", client_assertion: assertion }), /client_assertion_type must be/);
    refusedClient(
      await postForm(`${broker.url}/token`, { grant_type: "client_credentials", client_id: added.clientId, client_secret: "guess" }),
      /authenticates with private_key_jwt/,
    );
    refusedClient(await postForm(`${broker.url}/token`, { ...form, client_id: "someone-else" }), /Unknown client/);
    // Nothing was spent by the refusals: the assertion still works once.
    expect((await postForm(`${broker.url}/token`, form)).status).toBe(200);
  });

  it("a jwks_uri on a loopback or private address is never fetched when private networks are not allowed", async () => {
    const guarded = await startBroker({ TRUST_PROXY: "true" }, { documentFetch: { lookup: docs.lookup(), ca: docs.caCert } });
    try {
      const key = await signingKey();
      docs.json("/private/jwks.json", keySet(key));
      const registered = await postJson(
        `${guarded.url}/register`,
        {
          client_name: "Intranet agent",
          grant_types: ["authorization_code"],
          redirect_uris: ["http://127.0.0.1:7777/callback"],
          token_endpoint_auth_method: "private_key_jwt",
          jwks_uri: `${docs.origin}/private/jwks.json`,
        },
        { "x-forwarded-for": freshIp() },
      );
      expect(registered.status).toBe(201);
      const clientId = registered.json!.client_id as string;
      const before = docs.connections;
      const res = await postForm(`${guarded.url}/token`, {
        grant_type: "authorization_code",
        code: "x",
        redirect_uri: "http://127.0.0.1:7777/callback",
        code_verifier: "v".repeat(43),
        ...assertionForm(await sign(key, assertionClaims(clientId, guarded.url))),
      });
      refusedClient(
        res,
        new RegExp(`could not be fetched: ${DOCUMENT_HOST.replace(/\./g, "\\.")} resolves to 127\\.0\\.0\\.1, a private, loopback or link-local address`),
      );
      expect(docs.connections).toBe(before);
    } finally {
      await guarded.stop();
    }
  });
});

describe("a published key set: cached by its headers, fetched again on an unknown kid at most every 30 s", () => {
  let docs: DocumentServer;
  let broker: TestBroker;
  const clock = new ManualClock();

  beforeAll(async () => {
    docs = await startDocumentServer();
    broker = await startBroker({ CIMD_ALLOW_PRIVATE_NETWORKS: "true" }, { clock, documentFetch: { lookup: docs.lookup(), ca: docs.caCert } });
  });
  afterAll(async () => {
    await broker.stop();
    await docs.close();
  });

  it("rotation, made-up kids and staleness", async () => {
    const first = await signingKey("2026-a");
    const second = await signingKey("2026-b");
    docs.json("/rotating/jwks.json", keySet(first), { "cache-control": "max-age=600" });
    const added = await addClient(broker, ["--name", "Rotating job", "--grant-type", "client_credentials", "--jwks-uri", `${docs.origin}/rotating/jwks.json`]);
    const fetches = () => docs.requests.filter((r) => r === "GET /rotating/jwks.json").length;
    const token = async (key: SigningKey) =>
      postForm(`${broker.url}/token`, {
        grant_type: "client_credentials",
        ...assertionForm(await sign(key, assertionClaims(added.clientId, broker.url, {}, clock.now()))),
      });

    expect((await token(first)).status).toBe(200);
    expect((await token(first)).status).toBe(200);
    expect(fetches()).toBe(1);

    // The client rotates to a new key: the first assertion naming it fetches the set again.
    docs.json("/rotating/jwks.json", keySet(second), { "cache-control": "max-age=600" });
    clock.advance(MIN_REFETCH_MS);
    expect((await token(second)).status).toBe(200);
    expect(fetches()).toBe(2);

    // Made-up kids: refused, and the set is not fetched again within 30 s however many arrive.
    const stranger = await signingKey("made-up");
    for (let i = 0; i < 5; i++) refusedClient(await token(stranger), /no key of the client's key set fits it \(kid "made-up"/);
    expect(fetches()).toBe(2);
    clock.advance(MIN_REFETCH_MS);
    refusedClient(await token(stranger), /no key of the client's key set fits it/);
    expect(fetches()).toBe(3);

    // Stale after its max-age: fetched again before use.
    clock.advance(600_000);
    expect((await token(second)).status).toBe(200);
    expect(fetches()).toBe(4);
  });
});
