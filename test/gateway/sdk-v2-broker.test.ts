// The MCP SDK v2 client through a real broker (HTTP backend) to an SDK v2 server, in both eras,
// each connection doing its real OAuth flow against the broker (discovery from the 401, dynamic
// registration, PKCE, consent, the demo IdP, RFC 9207 `iss` checked by finishAuth).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { toolText } from "./harness.ts";
import { connectV2WithOAuth, type Era } from "./v2-client.ts";
import { startV2McpServer, type V2McpServer } from "./v2-mcp-server.ts";

let server: V2McpServer;
let t: TestBroker;
let callback: CallbackServer;
beforeAll(async () => {
  server = await startV2McpServer();
  [t, callback] = await Promise.all([startBroker({ MCP_SERVER_URL: server.url }), new CallbackServer().start()]);
});
afterAll(async () => {
  await callback.close();
  await t.stop();
  await server.close();
});

/** `user` signs in at the demo IdP and consents; the callback receives code, state and iss. */
const signInAs = (user: string) => async (url: URL) => {
  const back = await new HttpBrowser().walk(url.href, callback.url, answerAs(user));
  await fetch(back);
};

const TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const reached = (user: string) => server.requests.filter((r) => r.headers["x-auth-subject"] === `demo:${user}`);

describe("the MCP SDK v2 client through the broker", () => {
  it.each<[string, Era, string]>([
    ["2026-07-28, stateless (pinned)", "2026-07-28", "2026-07-28"],
    ["2026-07-28, negotiated (auto)", "auto", "2026-07-28"],
  ])("%s: signs in, lists and calls tools; the MCP server sees the user and the request metadata", async (_what, era, version) => {
    const user = `modern-${era}`.replace(/[^a-z0-9-]/gi, "");
    const { client, provider } = await connectV2WithOAuth(`${t.url}/mcp`, era, callback, signInAs(user), { traceparent: TRACEPARENT });
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe(version);
      expect((await client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(["echo", "query"]);
      expect(toolText(await client.callTool({ name: "query", arguments: { region: "eu-north-1", query: "SELECT 2" } }))).toBe("SELECT 2 in eu-north-1");
    } finally {
      await client.close();
    }
    const seen = reached(user);
    expect(seen.length).toBeGreaterThanOrEqual(2);
    for (const { headers } of seen) {
      expect(headers.authorization).toBeUndefined();
      expect(headers["mcp-session-id"]).toBeUndefined();
      expect(JSON.stringify(headers)).not.toContain(provider.accessToken);
    }
    expect(seen.find((r) => r.headers["mcp-method"] === "tools/call")?.headers).toMatchObject({
      "mcp-protocol-version": "2026-07-28",
      "mcp-name": "query",
      "mcp-param-region": "eu-north-1",
      traceparent: TRACEPARENT,
      "x-auth-user": user,
    });
  });

  it("2025-11-25 (initialize, a session): signs in, calls tools in its session, ends it", async () => {
    const { client, transport } = await connectV2WithOAuth(`${t.url}/mcp`, "legacy", callback, signInAs("legacy-v2"));
    try {
      expect(client.getNegotiatedProtocolVersion()).toBe("2025-11-25");
      const sessionId = transport.sessionId!;
      expect(server.issuedSessions).toContain(sessionId);
      expect(toolText(await client.callTool({ name: "echo", arguments: { message: "in a session" } }))).toBe("in a session");
      expect(reached("legacy-v2").filter((r) => r.headers["mcp-session-id"] === sessionId).length).toBeGreaterThanOrEqual(1);
      await transport.terminateSession();
    } finally {
      await client.close();
    }
  });
});
