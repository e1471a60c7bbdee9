// MCP 2026-07-28 through the proxy: the SDK v2 client and a recording SDK v2 server. What the
// revision puts in headers (Mcp-Method, Mcp-Name, Mcp-Param-*, trace context) arrives unchanged;
// a request whose headers disagree with its body is refused before anything is forwarded.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startGateway, toolText, type TestGateway } from "./harness.ts";
import { connectV2 } from "./v2-client.ts";
import { startV2McpServer, type V2McpServer } from "./v2-mcp-server.ts";

let server: V2McpServer;
let gateway: TestGateway;
beforeAll(async () => {
  server = await startV2McpServer();
  gateway = await startGateway({ targetUrl: server.url });
});
afterAll(async () => {
  await gateway.close();
  await server.close();
});

const TRACE = {
  traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
  tracestate: "congo=t61rcWkgMzE",
  baggage: "userId=alice",
};
const META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "raw", version: "1" },
  "io.modelcontextprotocol/clientCapabilities": {},
};

/** A raw 2026-07-28 POST as the SDK v2 client sends it, with headers of the test's choosing. */
function post(body: unknown, headers: Record<string, string>) {
  return fetch(gateway.url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

const forwardedFor = (user: string) => server.requests.filter((r) => r.headers["x-auth-subject"] === `test:${user}`);

describe("MCP 2026-07-28 through the proxy", () => {
  it("the SDK v2 client (pinned to 2026-07-28) calls tools statelessly; its headers reach the MCP server unchanged", async () => {
    const { client } = await connectV2(gateway.url, "2026-07-28", { "x-test-user": "modern", ...TRACE });
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(["echo", "query"]);
      expect(toolText(await client.callTool({ name: "query", arguments: { region: "us-west1", query: "SELECT 1" } }))).toBe("SELECT 1 in us-west1");
    } finally {
      await client.close();
    }
    const seen = forwardedFor("modern");
    expect(seen.every((r) => r.headers["mcp-session-id"] === undefined)).toBe(true);
    const call = seen.find((r) => r.headers["mcp-method"] === "tools/call");
    expect(call?.headers).toMatchObject({ "mcp-protocol-version": "2026-07-28", "mcp-name": "query", "mcp-param-region": "us-west1", ...TRACE });
    expect(seen.find((r) => r.headers["mcp-method"] === "tools/list")).toBeDefined();
  });

  it("passes Base64-encoded values through as sent, and Mcp-Param-* headers it does not know", async () => {
    const name = `=?base64?${Buffer.from("query").toString("base64")}?=`;
    const region = `=?base64?${Buffer.from("Zürich ").toString("base64")}?=`;
    const res = await post(
      { jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "query", arguments: { region: "Zürich ", query: "q" }, _meta: META } },
      { "x-test-user": "encoded", "mcp-method": "tools/call", "mcp-name": name, "mcp-param-region": region, "mcp-param-unknown-to-all": "kept" },
    );
    const text = await res.text();
    expect([res.status, text]).toEqual([200, expect.stringContaining("q in Zürich ")]);
    expect(forwardedFor("encoded")[0]?.headers).toMatchObject({ "mcp-name": name, "mcp-param-region": region, "mcp-param-unknown-to-all": "kept" });
  });

  it.each([
    ["Mcp-Method names another method", { "mcp-method": "tools/list", "mcp-name": "echo" }, /Mcp-Method header value "tools\/list"/],
    ["Mcp-Name names another tool", { "mcp-method": "tools/call", "mcp-name": "echo" }, /Mcp-Name header value "echo" does not match body value "query"/],
    [
      "Mcp-Name names another tool, Base64-encoded",
      { "mcp-method": "tools/call", "mcp-name": `=?base64?${Buffer.from("echo").toString("base64")}?=` },
      /Mcp-Name header value "echo"/,
    ],
    ["Mcp-Name is a malformed Base64 value", { "mcp-method": "tools/call", "mcp-name": "=?base64?***?=" }, /invalid =\?base64\?/],
    [
      "MCP-Protocol-Version names another revision",
      { "mcp-method": "tools/call", "mcp-name": "query", "mcp-protocol-version": "2025-11-25" },
      /MCP-Protocol-Version/,
    ],
  ])("refuses a request whose %s with 400 HeaderMismatch (-32020), forwarding nothing", async (_what, headers, message) => {
    const user = `mismatch-${Object.values(headers).join("").length}`;
    const before = server.requests.length;
    const res = await post(
      { jsonrpc: "2.0", id: 42, method: "tools/call", params: { name: "query", arguments: { region: "eu", query: "q" }, _meta: META } },
      { "x-test-user": user, ...headers },
    );
    expect(res.status).toBe(400);
    const body = (await res.json()) as { id: unknown; error: { code: number; message: string } };
    expect(body).toMatchObject({ jsonrpc: "2.0", id: 42, error: { code: -32020 } });
    expect(body.error.message).toMatch(message);
    expect(server.requests.length).toBe(before);
  });

  it("checks a body too large to hold in one read against its headers as well (a tool name after 1 MB of arguments)", async () => {
    const before = server.requests.length;
    const body = JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { arguments: { message: "x".repeat(1024 * 1024) }, _meta: META, name: "query" },
    });
    const res = await post(body, { "x-test-user": "big", "mcp-method": "tools/call", "mcp-name": "echo" });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32020);
    expect(server.requests.length).toBe(before);
  });

  it("refuses a mirrored body over 4 MiB with 413 and a JSON-RPC error, forwarding nothing", async () => {
    const before = server.requests.length;
    const body = JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/call", params: { name: "echo", arguments: { message: "x".repeat(5 * 1024 * 1024) } } });
    const res = await post(body, { "x-test-user": "huge", "mcp-method": "tools/call", "mcp-name": "echo" });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32000, message: expect.stringMatching(/4 MiB/) }, id: null });
    expect(server.requests.length).toBe(before);
  });

  it("leaves a body it cannot parse to the MCP server, which answers it", async () => {
    const res = await post("{not json", { "x-test-user": "garbled", "mcp-method": "tools/call" });
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    expect(forwardedFor("garbled")).toHaveLength(1);
  });

  it("the SDK v2 client in the 2025 era (initialize, a session) works on the same endpoint", async () => {
    const { client, transport } = await connectV2(gateway.url, "legacy", { "x-test-user": "legacy-v2" });
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe("2025-11-25");
      expect(transport.sessionId).toBeTruthy();
      expect(toolText(await client.callTool({ name: "echo", arguments: { message: "hi" } }))).toBe("hi");
      await transport.terminateSession();
    } finally {
      await client.close();
    }
    expect(forwardedFor("legacy-v2").every((r) => r.headers["mcp-method"] === undefined)).toBe(true);
  });
});
