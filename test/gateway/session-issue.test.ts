// MCP sessions (2025 revisions) are bound to their user when the MCP server issues them, and only
// then. Who must NOT get a session: whoever presents an id before (or without) the MCP server
// issuing it to them — a guessed or predicted id is answered 404 by the broker and never
// forwarded, so it cannot be bound to the guesser and the user it is later issued to keeps it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { connectClient, sessionHeaders, startGateway, toolText, type TestGateway } from "./harness.ts";
import { startV2McpServer, type V2McpServer } from "./v2-mcp-server.ts";

let server: V2McpServer;
let gateway: TestGateway;
let issued = 0;
beforeAll(async () => {
  // A server whose session ids can be predicted: the next one is always `predictable-<n>`.
  server = await startV2McpServer({ sessionIds: () => `predictable-${++issued}` });
  gateway = await startGateway({ targetUrl: server.url });
});
afterAll(async () => {
  await gateway.close();
  await server.close();
});

const JSON_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25" };
const toolsList = JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" });
const by = (user: string) => server.requests.filter((r) => r.headers["x-auth-subject"] === `test:${user}`);

describe("MCP session ids are bound when the MCP server issues them", () => {
  it("answers an id it never saw issued with 404 (POST, GET, DELETE), forwarding nothing and binding nothing", async () => {
    const attempts: Array<RequestInit & { method: string }> = [
      { method: "POST", headers: { ...JSON_HEADERS, "x-test-user": "guesser", "mcp-session-id": "guessed-123" }, body: toolsList },
      { method: "GET", headers: { accept: "text/event-stream", "x-test-user": "guesser", "mcp-session-id": "guessed-123" } },
      { method: "DELETE", headers: { "x-test-user": "guesser", "mcp-session-id": "guessed-123" } },
    ];
    for (const init of attempts) {
      const res = await fetch(gateway.url, init);
      expect([init.method, res.status]).toEqual([init.method, 404]);
      expect(await res.json()).toEqual({ jsonrpc: "2.0", error: { code: -32001, message: expect.stringMatching(/Session not found.*initialize/) }, id: null });
    }
    expect(by("guesser")).toEqual([]);
    expect(await gateway.binding.ownerOf("guessed-123")).toBeUndefined();
  });

  it("a predicted id presented before it is issued does not take the session from the user it is issued to", async () => {
    const predicted = `predictable-${issued + 1}`;
    const early = await fetch(gateway.url, {
      method: "POST",
      headers: { ...JSON_HEADERS, "x-test-user": "predictor", "mcp-session-id": predicted },
      body: toolsList,
    });
    expect(early.status).toBe(404);
    expect(by("predictor")).toEqual([]);

    const { client, transport } = await connectClient(gateway.url, { "x-test-user": "rightful" });
    try {
      expect(transport.sessionId).toBe(predicted);
      expect(await gateway.binding.ownerOf(predicted)).toBe("test:rightful");
      expect(toolText(await client.callTool({ name: "echo", arguments: { message: "mine" } }))).toBe("mine");
      const late = await fetch(gateway.url, {
        method: "POST",
        headers: { ...sessionHeaders(transport), ...JSON_HEADERS, "x-test-user": "predictor" },
        body: toolsList,
      });
      expect(late.status).toBe(403);
      expect(by("predictor")).toEqual([]);
      expect((await client.listTools()).tools.length).toBe(2);
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  it("after the MCP server forgot its sessions (a restart), its 404 reaches the client, which initializes again", async () => {
    const { client, transport } = await connectClient(gateway.url, { "x-test-user": "restarted" });
    const old = transport.sessionId!;
    server.forgetSessions();
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: { ...sessionHeaders(transport), ...JSON_HEADERS, "x-test-user": "restarted" },
      body: toolsList,
    });
    expect(res.status).toBe(404);
    expect(by("restarted").some((r) => r.headers["mcp-session-id"] === old)).toBe(true);
    await client.close();
    const again = await connectClient(gateway.url, { "x-test-user": "restarted" });
    try {
      expect(again.transport.sessionId).not.toBe(old);
      expect(toolText(await again.client.callTool({ name: "echo", arguments: { message: "back" } }))).toBe("back");
    } finally {
      await again.transport.terminateSession().catch(() => undefined);
      await again.client.close();
    }
  });

  it("binds nothing for a 2026-07-28 request (no session) and forwards it per request", async () => {
    const before = server.issuedSessions.length;
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: { ...JSON_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/list", "x-test-user": "stateless" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/list",
        params: { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} } },
      }),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("mcp-session-id")).toBeNull();
    expect(await res.text()).toContain("echo");
    expect(server.issuedSessions.length).toBe(before);
  });
});
