// PUBLIC_URL with a path (https://host/broker behind a reverse proxy): the real MCP SDK client
// completes discovery, registration, consent, the upstream login and the callback under the
// path, then uses the tools; a proxy that strips the path reaches the same endpoints.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBrokerUnderPath, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer, connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { toolText } from "./harness.ts";

let t: TestBroker;
let origin: string;
let publicUrl: string;
let callback: CallbackServer;
beforeAll(async () => {
  [{ broker: t, origin, issuer: publicUrl }, callback] = await Promise.all([startBrokerUnderPath(), new CallbackServer().start()]);
});
afterAll(async () => {
  await callback.close();
  await t.stop();
});

describe("PUBLIC_URL with a path", () => {
  it("the MCP SDK client connects to PUBLIC_URL/mcp end to end; both path forms reach the MCP server", async () => {
    const browser = new HttpBrowser();
    const { client, transport, provider } = await connectWithOAuth(`${publicUrl}/mcp`, callback, async (url) => {
      const landing = await browser.walk(url.href, callback.url, answerAs("pathuser"));
      await fetch(landing.href);
    });
    // Every broker page and the upstream callback were under /broker.
    const visited = browser.visited.map((u) => new URL(u).pathname);
    expect(visited.filter((p) => !p.startsWith("/broker/"))).toEqual([]);
    expect(visited).toContain("/broker/oauth/callback");
    const who = JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} }))) as Record<string, unknown>;
    expect(who.subject).toBe("demo:pathuser");

    // A proxy that strips /broker sends /mcp: the same token, the same MCP session.
    const token = provider.tokens()?.access_token;
    const stripped = await fetch(`${origin}/mcp`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "mcp-session-id": transport.sessionId ?? "",
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/list" }),
    });
    expect(stripped.status).toBe(200);
    expect(await stripped.text()).toContain("whoami");
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  });

  it("challenges without a token under both path forms, pointing at metadata under PUBLIC_URL", async () => {
    for (const url of [`${publicUrl}/mcp`, `${origin}/mcp`]) {
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain(`resource_metadata="${publicUrl}/.well-known/oauth-protected-resource/mcp"`);
    }
  });
});
