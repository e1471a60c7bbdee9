// The Origin check of /mcp (Streamable HTTP 2025-11-25 and 2026-07-28, "Security & Endpoint": a
// present Origin that is not allowed MUST get 403). Who must NOT get through: a page of any other
// site, with or without a token — refused before authentication and before anything reaches the
// MCP server. Native clients and servers send no Origin and pass; PUBLIC_URL's own origin and the
// listed ones pass, and their answers name them in CORS.
//
// The MCP Inspector's web UI is served at http://localhost:6274 by default (CLIENT_PORT 6274,
// host localhost: modelcontextprotocol/inspector, client/bin/client.js).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { loadConfig, ConfigError } from "../../src/config/load.ts";
import { parseAllowedOrigins } from "../../src/config/client-interop.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";

const INSPECTOR = "http://localhost:6274";
const APP = "https://app.example.com";

let server: V2McpServer;
let listed: TestBroker;
let demoDefault: TestBroker;
let token: string;
let demoToken: string;
beforeAll(async () => {
  server = await startV2McpServer();
  [listed, demoDefault] = await Promise.all([
    startBroker({ MCP_SERVER_URL: server.url, ALLOWED_ORIGINS: `${APP}, ${INSPECTOR}` }),
    startBroker({ MCP_SERVER_URL: server.url }),
  ]);
  const [a, b] = await Promise.all([obtainTokens(listed.url, { user: "origin-user" }), obtainTokens(demoDefault.url, { user: "demo-user" })]);
  token = a.tokens.access_token;
  demoToken = b.tokens.access_token;
});
afterAll(async () => {
  await Promise.all([listed.stop(), demoDefault.stop()]);
  await server.close();
});

const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "origin-test", version: "1" } },
});

function post(broker: TestBroker, headers: Record<string, string>) {
  return fetch(`${broker.url}/mcp`, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: INITIALIZE,
  });
}

async function refused(broker: TestBroker, headers: Record<string, string>, init: RequestInit = {}) {
  const before = server.requests.length;
  const res = init.method ? await fetch(`${broker.url}/mcp`, { ...init, headers }) : await post(broker, headers);
  expect(res.status).toBe(403);
  expect(await res.json()).toEqual({
    jsonrpc: "2.0",
    error: { code: -32000, message: expect.stringMatching(/may not call this MCP endpoint.*ALLOWED_ORIGINS/) },
    id: null,
  });
  expect(res.headers.get("access-control-allow-origin")).toBeNull();
  expect(server.requests.length).toBe(before);
}

describe("Origin at /mcp", () => {
  it.each([
    ["another site", "https://evil.example"],
    ["a listed host on another port", "https://app.example.com:8443"],
    ["a listed host over another scheme", "http://app.example.com"],
    ["an opaque origin (sandboxed page, file:)", "null"],
    ["a loopback origin that is not listed", "http://127.0.0.1:5173"],
    ["garbage", "not an origin"],
  ])("refuses %s with 403 and a JSON-RPC error, before authentication and forwarding nothing", async (_what, origin) => {
    await refused(listed, { origin, authorization: `Bearer ${token}` });
    await refused(listed, { origin });
  });

  it("refuses a foreign site's preflight and its GET and DELETE", async () => {
    const origin = "https://evil.example";
    await refused(listed, { origin, "access-control-request-method": "POST", "access-control-request-headers": "authorization" }, { method: "OPTIONS" });
    await refused(listed, { origin, authorization: `Bearer ${token}`, accept: "text/event-stream" }, { method: "GET" });
    await refused(listed, { origin, authorization: `Bearer ${token}`, "mcp-session-id": "x" }, { method: "DELETE" });
  });

  it("lets requests without Origin through (native clients, servers), with no CORS grant or exposed headers, but Vary", async () => {
    const res = await post(listed, { authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    await res.text();
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
    expect(res.headers.get("access-control-expose-headers")).toBeNull();
    expect(res.headers.get("vary")).toMatch(/Origin/i);
  });

  it.each([
    ["PUBLIC_URL's own origin", () => new URL(listed.url).origin],
    ["a listed origin", () => APP],
    ["the MCP Inspector's web UI, listed", () => INSPECTOR],
  ])("lets %s through, names it in CORS, and forwards Origin unchanged", async (_what, originOf) => {
    const origin = originOf();
    const before = server.requests.length;
    const res = await post(listed, { origin, authorization: `Bearer ${token}` });
    expect(res.status).toBe(200);
    await res.text();
    expect(res.headers.get("access-control-allow-origin")).toBe(origin);
    expect(res.headers.get("access-control-expose-headers")).toMatch(/Mcp-Session-Id/);
    expect(res.headers.get("vary")).toMatch(/Origin/i);
    expect(server.requests.slice(before).map((r) => r.headers.origin)).toEqual([origin]);
    const preflight = await fetch(`${listed.url}/mcp`, {
      method: "OPTIONS",
      headers: {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers": "authorization, mcp-method, mcp-name, mcp-param-region, traceparent",
      },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe(origin);
    const allowed = (preflight.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    for (const h of ["authorization", "mcp-method", "mcp-name", "mcp-param-region", "traceparent", "tracestate", "baggage", "mcp-protocol-version"])
      expect(allowed).toContain(h);
    expect(preflight.headers.get("access-control-expose-headers")).toMatch(/Mcp-Session-Id/);
  });

  it("in demo mode without ALLOWED_ORIGINS lets the loopback origins through, and no other", async () => {
    for (const origin of [INSPECTOR, "http://127.0.0.1:5173", "http://[::1]:8080"]) {
      const res = await post(demoDefault, { origin, authorization: `Bearer ${demoToken}` });
      expect([origin, res.status]).toEqual([origin, 200]);
      await res.text();
    }
    await refused(demoDefault, { origin: "https://evil.example", authorization: `Bearer ${demoToken}` });
    await refused(demoDefault, { origin: "http://localhost.evil.example", authorization: `Bearer ${demoToken}` });
  });
});

describe("ALLOWED_ORIGINS", () => {
  it("reads origins in their serialized form; outside demo mode nothing but them (and PUBLIC_URL's) by default", () => {
    expect(parseAllowedOrigins({ ALLOWED_ORIGINS: "HTTPS://App.Example.com:443/, http://localhost:6274" }, false)).toEqual({
      origins: ["https://app.example.com", "http://localhost:6274"],
      loopback: false,
    });
    expect(parseAllowedOrigins({}, false)).toEqual({ origins: [], loopback: false });
    expect(parseAllowedOrigins({}, true)).toEqual({ origins: [], loopback: true });
  });

  it.each(["*", "https://app.example.com/path", "https://app.example.com?x=1", "ftp://files.example.com", "https://user@app.example.com", "app.example.com"])(
    "refuses %j at start with one line naming the variable",
    (value) => {
      let error: unknown;
      try {
        loadConfig({ ALLOWED_ORIGINS: `https://ok.example, ${value}`, SECRET_KEY: "a".repeat(64) }, "/tmp");
      } catch (err) {
        error = err;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(/^ALLOWED_ORIGINS: expected comma-separated web origins/);
      expect((error as Error).message).toContain(JSON.stringify(value));
    },
  );
});
