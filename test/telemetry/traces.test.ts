// OpenTelemetry traces of a real broker, collected by an OTLP/HTTP receiver on 127.0.0.1: a
// sign-in (with the demo identity provider, reached over HTTP like any IdP) and a tools/call to a
// recording MCP server. What an operator's tracing backend needs: one trace per request, continuing
// the caller's `traceparent`; the grant, hot-store, IdP and MCP-server work as children; the MCP
// server and the IdP told the trace context; log lines that name their trace. What must never be
// there: a token, a code or a secret.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Writable } from "node:stream";
import { randomBytes } from "node:crypto";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, redeemCode, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { until } from "../support/wait.ts";
import { demoClientSecret } from "../../src/services.ts";
import { startDocumentServer, type DocumentServer } from "../support/document-server.ts";
import { assertionClaims, assertionForm, keySet, sign, signingKey } from "../support/client-assertion.ts";
import { postForm, postJson } from "../support/oauth-client.ts";

const SERVER = 2;
const CLIENT = 3;

let receiver: OtlpReceiver;
let mcp: V2McpServer;
let t: TestBroker;
let docs: DocumentServer;
const logLines: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  mcp = await startV2McpServer();
  docs = await startDocumentServer();
  const logs = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n").filter(Boolean)) logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  t = await startBroker(
    {
      MCP_SERVER_URL: mcp.url,
      LOG_LEVEL: "info",
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "broker-under-test",
      OTEL_RESOURCE_ATTRIBUTES: "deployment.environment=test",
      OTEL_TRACES_SAMPLER: "always_on",
      // Spans go out 20 ms after they end, not 5 s: the tests wait for them.
      OTEL_BSP_SCHEDULE_DELAY: "20",
      // The document server (metadata documents, key sets) is on 127.0.0.1.
      CIMD_ALLOW_PRIVATE_NETWORKS: "true",
    },
    { logDestination: logs, documentFetch: { lookup: docs.lookup(), ca: docs.caCert } },
  );
});
afterAll(async () => {
  await t?.stop();
  await mcp?.close();
  await docs?.close();
  await receiver?.close();
});

const hex = (bytes: number) => randomBytes(bytes).toString("hex");

/** The span for which `match` holds, once it has arrived. */
async function spanWhere(what: string, match: (s: ReceivedSpan) => boolean): Promise<ReceivedSpan> {
  await until(() => receiver.spans.some(match), what);
  return receiver.spans.find(match)!;
}

const childrenOf = (span: ReceivedSpan) => receiver.spans.filter((s) => s.traceId === span.traceId && s.parentSpanId === span.spanId);

/** A sign-in with its values kept: the authorization code, the verifier, the tokens. */
async function signIn() {
  const client = await registerClient(t.url);
  const { callback, verifier } = await authorize(t.url, client, { user: "tracy" });
  const token = await redeemCode(t.url, client, { callback, verifier });
  expect(token.status).toBe(200);
  return { client, code: callback.searchParams.get("code")!, verifier, tokens: token.body as { access_token: string; refresh_token: string } };
}

/** A 2026-07-28 tools/call (stateless) with the caller's own trace context. */
function toolsCall(accessToken: string, traceparent: string) {
  return fetch(`${t.url}/mcp`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${accessToken}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
      "mcp-name": "echo",
      traceparent,
    },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: {
        name: "echo",
        arguments: { message: "traced" },
        _meta: {
          "io.modelcontextprotocol/protocolVersion": "2026-07-28",
          "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
          "io.modelcontextprotocol/clientCapabilities": {},
        },
      },
    }),
  });
}

describe("OpenTelemetry traces", () => {
  it("a tools/call continues the caller's trace: request span, proxy span, and the MCP server told the proxy span", async () => {
    const { client, tokens } = await signIn();
    const traceId = hex(16);
    const callerSpan = hex(8);
    const res = await toolsCall(tokens.access_token, `00-${traceId}-${callerSpan}-01`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("traced");

    const request = await spanWhere("the /mcp request span", (s) => s.traceId === traceId && s.kind === SERVER);
    expect(request.parentSpanId).toBe(callerSpan);
    expect(request.name).toBe("POST /mcp");
    expect(request.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/mcp",
      "http.response.status_code": 200,
      "oauth.client.id": client.client_id,
      "mcp.method.name": "tools/call",
    });
    const proxy = await spanWhere("the proxy span", (s) => s.parentSpanId === request.spanId && s.kind === CLIENT && s.name === "POST");
    expect(proxy.attributes).toMatchObject({
      "http.request.method": "POST",
      "server.address": "127.0.0.1",
      "url.full": mcp.url,
      "http.response.status_code": 200,
    });
    // Bearer validation read the new token from the hot store, inside the request.
    expect(childrenOf(request).map((s) => s.name)).toContain("db accessTokenByHash");
    // The MCP server's spans belong under the broker's call to it, not beside it under the caller's.
    const call = mcp.requests.find((r) => String(r.headers.traceparent).includes(traceId));
    expect(call?.headers.traceparent).toBe(`00-${traceId}-${proxy.spanId}-01`);
    expect(request.resource).toMatchObject({ "service.name": "broker-under-test", "deployment.environment": "test" });
    // The request's log line leads to its trace.
    await until(() => logLines.some((l) => l.msg === "mcp" && l.trace_id === traceId), "the /mcp access line with its trace id");
  });

  it("the sign-in's token grant and code exchange are children of /token; the IdP calls carry the trace to the IdP", async () => {
    const { client } = await signIn();
    const grant = await spanWhere("the grant span", (s) => s.name === "grant authorization_code" && s.attributes["oauth.client.id"] === client.client_id);
    expect(grant.attributes).toMatchObject({ "oauth.grant_type": "authorization_code" });
    const token = await spanWhere("the /token span", (s) => s.spanId === grant.parentSpanId);
    expect(token).toMatchObject({ name: "POST /token", kind: SERVER, parentSpanId: "" });
    expect(token.attributes).toMatchObject({ "http.route": "/token", "http.response.status_code": 200, "oauth.grant_type": "authorization_code" });
    const statements = childrenOf(grant).map((s) => s.name);
    expect(statements).toEqual(expect.arrayContaining(["db codeByHash", "db exchangeCode"]));
    expect(childrenOf(grant).find((s) => s.name === "db exchangeCode")?.attributes).toMatchObject({ "db.system.name": "sqlite" });

    // The callback exchanged the IdP's code: a provider span, its HTTP call, and the IdP's own
    // request span (the demo IdP answers on this broker) under that call.
    const callback = await spanWhere(
      "the callback span",
      (s) => s.name === "GET /oauth/callback" && receiver.spans.some((c) => c.parentSpanId === s.spanId && c.name === "upstream exchangeCode"),
    );
    const exchange = childrenOf(callback).find((s) => s.name === "upstream exchangeCode")!;
    expect(exchange.attributes).toMatchObject({ "upstream.provider": "demo" });
    const post = childrenOf(exchange).find((s) => s.kind === CLIENT && s.name === "POST")!;
    expect(post.attributes).toMatchObject({ "http.request.method": "POST", "http.response.status_code": 200 });
    const atIdp = await spanWhere("the IdP's request span under the call", (s) => s.parentSpanId === post.spanId && s.kind === SERVER);
    expect(atIdp.traceId).toBe(callback.traceId);
    expect(String(atIdp.attributes["url.path"])).toMatch(/^\/demo-idp\//);
  });

  it("a client's metadata document and key set are fetched in spans under the request that needed them", async () => {
    const redirect = "http://127.0.0.1:7777/callback";
    const documentId = `${docs.origin}/traced/client.json`;
    docs.json("/traced/client.json", {
      client_id: documentId,
      client_name: "Traced agent",
      redirect_uris: [redirect],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    });
    const authorizeUrl = new URL(`${t.url}/authorize`);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: documentId,
      redirect_uri: redirect,
      code_challenge: "c".repeat(43),
      code_challenge_method: "S256",
    }))
      authorizeUrl.searchParams.set(k, v);
    await (await fetch(authorizeUrl, { redirect: "manual" })).text();
    const cimd = await spanWhere("the document fetch", (s) => s.name === "cimd fetch" && s.attributes["url.full"] === documentId);
    expect(cimd.kind).toBe(CLIENT);
    // A parent ends after its children: it may come in a later export.
    expect(await spanWhere("the /authorize span", (s) => s.spanId === cimd.parentSpanId)).toMatchObject({ name: "GET /authorize", kind: SERVER });

    const key = await signingKey();
    docs.json("/traced/jwks.json", keySet(key));
    const registered = await postJson(`${t.url}/register`, {
      client_name: "Signed agent",
      redirect_uris: [redirect],
      grant_types: ["authorization_code"],
      token_endpoint_auth_method: "private_key_jwt",
      jwks_uri: `${docs.origin}/traced/jwks.json`,
    });
    const clientId = registered.json!.client_id as string;
    // A made-up code: the client is authenticated (its key set fetched) before the code is refused.
    const res = await postForm(`${t.url}/token`, {
      grant_type: "authorization_code",
      code: "made-up",
      redirect_uri: redirect,
      code_verifier: "v".repeat(43),
      ...assertionForm(await sign(key, assertionClaims(clientId, `${t.url}/token`))),
    });
    expect(res.status).toBe(400);
    const jwks = await spanWhere("the key set fetch", (s) => s.name === "jwks fetch" && s.attributes["url.full"] === `${docs.origin}/traced/jwks.json`);
    const grant = await spanWhere("the grant span", (s) => s.spanId === jwks.parentSpanId);
    expect(grant).toMatchObject({ name: "grant authorization_code", status: 2 });
    expect(grant.attributes).toMatchObject({ "oauth.client.id": clientId, "error.type": "invalid_grant" });
  });

  it("no span holds a token, a code, a verifier or a secret; queries are redacted as in the log", async () => {
    const { client, code, verifier, tokens } = await signIn();
    const res = await toolsCall(tokens.access_token, `00-${hex(16)}-${hex(8)}-01`);
    expect(res.status).toBe(200);
    await res.text();
    const refreshed = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(refreshed.status).toBe(200);
    await spanWhere("the refresh's span", (s) => s.name === "grant refresh_token" && s.attributes["oauth.client.id"] === client.client_id);
    const secrets = [
      code,
      verifier,
      tokens.access_token,
      tokens.refresh_token,
      String(refreshed.body.access_token),
      String(refreshed.body.refresh_token),
      t.broker.config.secretKey.toString("base64"),
      t.broker.config.secretKey.toString("hex"),
      // The broker's own client secret at the identity provider (here the demo one).
      demoClientSecret(t.broker.config),
    ];
    for (const span of receiver.spans) {
      for (const secret of secrets) expect(span.raw).not.toContain(secret);
      // Nothing of a broker token's shape, whoever's it is.
      expect(span.raw).not.toMatch(/mab_(at|rt|ac)_/);
    }
    const callbacks = receiver.spans.filter((s) => s.name === "GET /oauth/callback");
    for (const s of callbacks) expect(s.attributes["url.query"]).toMatch(/code=\[redacted\]/);
  });
});
