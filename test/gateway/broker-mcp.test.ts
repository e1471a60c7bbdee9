// The protected MCP endpoint of a real broker: bearer validation (every 401/403 case with its
// WWW-Authenticate and nothing forwarded) and the real MCP SDK client through it to a real SDK
// MCP server.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens, tokenRequest } from "../support/oauth-flow.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { connectClient, sessionHeaders, sseEvents, toolText } from "./harness.ts";
import { hashPresentedToken } from "../../src/grants/token-format.ts";
import { until, within } from "../support/wait.ts";

let mcpServer: DemoMcpServer;
let t: TestBroker;
let token: string;
let clientId: string;

const initialize = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
});

async function post(headers: Record<string, string>, url = `${t.url}/mcp`, body: string = initialize) {
  return fetch(url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers }, body });
}

beforeAll(async () => {
  mcpServer = await startDemoMcpServer();
  t = await startBroker({ MCP_SERVER_URL: mcpServer.url });
  const obtained = await obtainTokens(t.url, { user: "mcp-user" });
  token = obtained.tokens.access_token;
  clientId = obtained.client.client_id;
});
afterAll(async () => {
  await t.stop();
  await mcpServer.close();
});

describe("bearer validation at /mcp", () => {
  const metadataUrl = () => `${t.url}/.well-known/oauth-protected-resource/mcp`;

  async function refused(headers: Record<string, string>, url?: string, body?: string) {
    const before = mcpServer.requests.length;
    const res = await post(headers, url, body);
    expect(mcpServer.requests.length).toBe(before);
    return res;
  }

  it("answers 401 with the resource metadata challenge when no token is sent", async () => {
    for (const headers of [{}, { authorization: "Basic dXNlcjpwYXNz" }] as Array<Record<string, string>>) {
      const res = await refused(headers);
      expect(res.status).toBe(401);
      const challenge = res.headers.get("www-authenticate")!;
      expect(challenge).toContain(`Bearer resource_metadata="${metadataUrl()}"`);
      expect(challenge).toContain('scope="mcp"');
      expect(challenge).not.toContain("error=");
    }
  });

  it("answers 401 invalid_token for unknown, malformed, expired, revoked and foreign tokens", async () => {
    const { tokens: expiring } = await obtainTokens(t.url, { user: "expiring" });
    await t.broker.database.db.accessToken.update({
      where: { tokenHash: hashPresentedToken(expiring.access_token) },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    const { tokens: revoked, client } = await obtainTokens(t.url, { user: "revoked" });
    await fetch(`${t.url}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: revoked.access_token, client_id: client.client_id }),
    });
    const other = await startBroker();
    let foreign: string;
    try {
      foreign = (await obtainTokens(other.url, { user: "elsewhere" })).tokens.access_token;
    } finally {
      await other.stop();
    }
    const cases: Array<[string, RegExp]> = [
      ["Bearer mab_at_unknown", /not valid/],
      ["Bearer not a token", /well-formed/],
      [`Bearer ${expiring.access_token}`, /expired/],
      [`Bearer ${revoked.access_token}`, /revoked/],
      [`Bearer ${foreign}`, /not valid/],
    ];
    for (const [authorization, description] of cases) {
      const res = await refused({ authorization });
      expect(res.status).toBe(401);
      const challenge = res.headers.get("www-authenticate")!;
      expect(challenge).toContain(`resource_metadata="${metadataUrl()}"`);
      expect(challenge).toContain('error="invalid_token"');
      expect(challenge).toMatch(description);
    }
  });

  it("refuses a token minted for another resource (audience)", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "audience" });
    await t.broker.database.db.accessToken.update({
      where: { tokenHash: hashPresentedToken(tokens.access_token) },
      data: { resource: "https://other.example/mcp" },
    });
    const res = await refused({ authorization: `Bearer ${tokens.access_token}` });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("not issued for this resource");
  });

  it("answers 403 insufficient_scope with the needed scope", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "scoped" });
    await t.broker.database.db.accessToken.update({ where: { tokenHash: hashPresentedToken(tokens.access_token) }, data: { scope: "offline_access" } });
    const res = await refused({ authorization: `Bearer ${tokens.access_token}` });
    expect(res.status).toBe(403);
    const challenge = res.headers.get("www-authenticate")!;
    expect(challenge).toContain('error="insufficient_scope"');
    expect(challenge).toContain('scope="mcp"');
    expect(challenge).toContain(`resource_metadata="${metadataUrl()}"`);
  });

  it("refuses tokens in the query string or a form body with 400, ignoring them", async () => {
    const inQuery = await refused({}, `${t.url}/mcp?access_token=${token}`);
    expect(inQuery.status).toBe(400);
    // The MCP endpoint's error format (JSON-RPC); the RFC 6750 error is in the challenge.
    expect(await inQuery.json()).toEqual({ jsonrpc: "2.0", error: { code: -32000, message: expect.stringMatching(/never in the URL/) }, id: null });
    expect(inQuery.headers.get("www-authenticate")).toContain('error="invalid_request"');
    const inBody = await refused({ "content-type": "application/x-www-form-urlencoded" }, undefined, `access_token=${token}`);
    expect(inBody.status).toBe(400);
  });

  it("answers CORS preflights without a token", async () => {
    const res = await fetch(`${t.url}/mcp`, {
      method: "OPTIONS",
      headers: { origin: "http://localhost:6274", "access-control-request-method": "POST", "access-control-request-headers": "authorization, mcp-session-id" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-headers")).toMatch(/Authorization/i);
    expect(res.headers.get("access-control-expose-headers")).toMatch(/WWW-Authenticate/);
    expect(res.headers.get("access-control-expose-headers")).toMatch(/Mcp-Session-Id/);
  });
});

describe("the real MCP SDK client through the broker", () => {
  it("lists and calls tools; the MCP server sees the identity and never the token", async () => {
    const { client, transport } = await connectClient(`${t.url}/mcp`, {
      authorization: `Bearer ${token}`,
      cookie: "mab_session=stolen",
      "x-auth-subject": "github:1",
    });
    try {
      const tools = await client.listTools();
      expect(tools.tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["whoami", "echo", "countdown"]));
      expect(toolText(await client.callTool({ name: "echo", arguments: { message: "hello" } }))).toContain("hello");
      const seen = JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} }))) as Record<string, unknown>;
      expect(seen).toMatchObject({ subject: "demo:mcp-user", user: "mcp-user", clientId, scopes: "mcp", authorization: null, cookie: null });
      const raw = mcpServer.requests.map((r) => r.headers);
      for (const headers of raw) {
        expect(headers.authorization).toBeUndefined();
        expect(headers.cookie).toBeUndefined();
        expect(headers["x-upstream-access-token"]).toBeUndefined();
        expect(JSON.stringify(headers)).not.toContain(token);
      }
      expect(raw.some((h) => h["x-auth-subject"] === "github:1")).toBe(false);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  it("delivers countdown progress notifications before the result", async () => {
    const { client, transport } = await connectClient(`${t.url}/mcp`, { authorization: `Bearer ${token}` });
    try {
      const order: string[] = [];
      const result = await client.callTool({ name: "countdown", arguments: { from: 3, intervalMs: 50 } }, undefined, {
        onprogress: (p) => order.push(`progress ${p.progress}`),
      });
      order.push("result");
      expect(toolText(result)).toBe("liftoff");
      expect(order).toEqual(["progress 1", "progress 2", "progress 3", "result"]);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  it("carries the standalone GET stream, resumes it with Last-Event-ID, and ends the session with DELETE", async () => {
    const { client, transport } = await connectClient(`${t.url}/mcp`, { authorization: `Bearer ${token}` }, { standaloneStream: false });
    const auth = { authorization: `Bearer ${token}` };
    const getHeaders = sessionHeaders(transport, { ...auth, accept: "text/event-stream" });
    const first = new AbortController();
    const stream = await fetch(`${t.url}/mcp`, { headers: getHeaders, signal: first.signal });
    expect(stream.status).toBe(200);
    expect(stream.headers.get("content-type")).toContain("text/event-stream");
    const events = sseEvents(stream.body);
    await client.callTool({ name: "notify", arguments: { message: "first" } });
    const one = (await within(events.next(), 3000, "first notification")).value!;
    expect(JSON.parse(one.data).params.data).toBe("first");
    expect(one.id).toBeTruthy();
    first.abort();
    await events.return(undefined).catch(() => {});
    // The MCP server must see the first stream end before "missed" is sent, or it would go there.
    const firstStream = mcpServer.requests.findLast((r) => r.method === "GET")!;
    await until(() => firstStream.closedEarly, "the MCP server to see the first stream end");
    await client.callTool({ name: "notify", arguments: { message: "missed" } });
    const second = new AbortController();
    const resumed = await fetch(`${t.url}/mcp`, { headers: { ...getHeaders, "last-event-id": one.id! }, signal: second.signal });
    expect(resumed.status).toBe(200);
    const replayEvents = sseEvents(resumed.body);
    const replay = (await within(replayEvents.next(), 3000, "replayed notification")).value!;
    expect(JSON.parse(replay.data).params.data).toBe("missed");
    second.abort();
    await replayEvents.return(undefined).catch(() => {});
    await transport.terminateSession();
    const after = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: sessionHeaders(transport, { ...auth, "content-type": "application/json", accept: "application/json, text/event-stream" }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" }),
    });
    expect(after.status).toBe(404);
    await client.close();
  });

  it("keeps one user's MCP session away from another user's token", async () => {
    const { client, transport } = await connectClient(`${t.url}/mcp`, { authorization: `Bearer ${token}` });
    const other = await obtainTokens(t.url, { user: "intruder" });
    const before = mcpServer.requests.length;
    const res = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: sessionHeaders(transport, {
        authorization: `Bearer ${other.tokens.access_token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      }),
      body: JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/list" }),
    });
    expect(res.status).toBe(403);
    expect(mcpServer.requests.length).toBe(before);
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  });

  it("keeps working across a refresh: the new access token reaches the same MCP server", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "refresher" });
    const refreshed = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    const res = await post({ authorization: `Bearer ${String(refreshed.body.access_token)}` });
    expect(res.status).toBe(200);
  });
});
