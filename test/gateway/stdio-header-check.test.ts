// The stdio bridge runs the same header/body check as the HTTP proxy before a request reaches a
// child: a request whose Mcp-Method or Mcp-Name disagrees with its body is refused with 400
// HeaderMismatch (-32020), with or without a session.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer } from "../support/mcp-oauth-client.ts";
import { bearerFor, callText, connectAs, disconnect, fixtureEnv, MCP_HEADERS } from "../stdio/stdio-support.ts";

let t: TestBroker;
let callback: CallbackServer;
beforeAll(async () => {
  [t, callback] = await Promise.all([startBroker(fixtureEnv()), new CallbackServer().start()]);
});
afterAll(async () => {
  await callback.close();
  await t.stop();
});

const META = { "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {} };
const mismatched = {
  jsonrpc: "2.0",
  id: 11,
  method: "tools/call",
  params: { name: "whoami", arguments: {}, _meta: META },
};

describe("header/body consistency at the stdio bridge", () => {
  it("refuses a 2026-07-28 request whose Mcp-Name disagrees with its body", async () => {
    const auth = await bearerFor(t.url, "stateless-mismatch");
    const res = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: { ...MCP_HEADERS, ...auth, "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "echo" },
      body: JSON.stringify(mismatched),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", id: 11, error: { code: -32020, message: expect.stringMatching(/Mcp-Name header value "echo"/) } });
  });

  it("refuses it inside a session too, and the session goes on", async () => {
    const c = await connectAs(t.url, "session-mismatch", callback);
    try {
      const res = await fetch(`${t.url}/mcp`, {
        method: "POST",
        headers: {
          ...MCP_HEADERS,
          authorization: `Bearer ${c.provider.tokens()?.access_token}`,
          "mcp-session-id": c.transport.sessionId ?? "",
          "mcp-protocol-version": "2025-11-25",
          "mcp-method": "tools/list",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 12, method: "tools/call", params: { name: "whoami", arguments: {} } }),
      });
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({ id: 12, error: { code: -32020 } });
      expect(JSON.parse(await callText(c.client, "whoami"))).toHaveProperty("pid");
    } finally {
      await disconnect(c);
    }
  });
});
