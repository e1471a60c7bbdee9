// claude.ai's custom connectors, as they reach the broker: from Anthropic's backend (a few shared
// egress addresses for every user), registering with dynamic client registration on every
// connection attempt, twice per attempt (anthropics/claude-ai-mcp#966), with a body that asks for
// the scope "claudeai", which no server advertises. The body below is the one quoted in
// modelcontextprotocol/modelcontextprotocol#653 ("Claude.ai sends invalid scope"); the redirect URI
// is claude.ai's callback, https://claude.ai/api/mcp/auth_callback.
//
// What the broker must do: drop the unknown scope instead of failing the
// registration (RFC 7591 §3.2.1 lets the server replace requested values, and the response says
// what was kept), let a burst of registrations from one address through, complete the flow, and
// sweep the registrations that never completed a grant after 24 hours.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, redeemCode } from "../support/oauth-flow.ts";
import { initializeAs, mcpPost } from "../support/mcp-probe.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { CLAUDE_AI_CALLBACK, CLAUDE_AI_REGISTRATION } from "./replays.ts";

/** One of Anthropic's egress addresses (160.79.104.0/21). */
const EGRESS = "160.79.104.10";
const CALLBACK = CLAUDE_AI_CALLBACK;

let t: TestBroker;
let mcp: DemoMcpServer;

async function register(): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${t.url}/register`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-forwarded-for": EGRESS, "user-agent": "python-httpx/0.28.1" },
    body: JSON.stringify(CLAUDE_AI_REGISTRATION),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

beforeAll(async () => {
  mcp = await startDemoMcpServer();
  // TRUST_PROXY: the broker sits behind a proxy that names the client (here: Anthropic's egress).
  t = await startBroker({ MCP_SERVER_URL: mcp.url, TRUST_PROXY: "true" });
});
afterAll(async () => {
  await t?.stop();
  await mcp?.close();
});

describe("claude.ai connectors", () => {
  const registered: string[] = [];

  it('registers with "scope":"claudeai": the unknown scope is dropped, not fatal', async () => {
    const { status, body } = await register();
    expect(status).toBe(201);
    expect(body.client_id).toEqual(expect.any(String));
    expect(body.redirect_uris).toEqual([CALLBACK]);
    // What was kept is said in the response: not the scope nobody supports.
    expect(String(body.scope ?? "")).not.toContain("claudeai");
    registered.push(String(body.client_id));
  });

  it("registers twice per connection attempt, 25 attempts at once from one egress address: none refused", async () => {
    const attempts = await Promise.all(Array.from({ length: 25 }, () => Promise.all([register(), register()])));
    const statuses = attempts.flat().map((r) => r.status);
    expect(statuses).toEqual(Array(50).fill(201));
    for (const r of attempts.flat()) registered.push(String(r.body.client_id));
  });

  it("completes the flow with the second registration of an attempt and reaches the MCP server", async () => {
    const clientId = registered.at(-1)!;
    const client = { client_id: clientId, redirect_uri: CALLBACK };
    // claude.ai names the MCP URL as the resource and asks for no scope of its own at /authorize.
    const { callback, verifier, state } = await authorize(t.url, client, { user: "claude-user" });
    expect(callback.origin + callback.pathname).toBe(CALLBACK);
    expect(callback.searchParams.get("state")).toBe(state);
    const token = await redeemCode(t.url, client, { callback, verifier });
    expect(token.status).toBe(200);
    expect(token.body.scope).toBe("mcp");
    expect(token.body.refresh_token).toEqual(expect.any(String));
    const res = await mcpPost(t.url, String(token.body.access_token), initializeAs({ name: "claude-ai", version: "1.0" }));
    expect(res.status).toBe(200);
    expect(mcp.requests.at(-1)?.headers["x-auth-scopes"]).toBe("mcp");
  });

  it("sweeps the registrations that never completed a grant after an hour, and keeps the one that did", async () => {
    const { grants } = t.broker.services;
    const early = await grants.sweep({ now: new Date(Date.now() + 50 * 60_000) });
    expect(early.unusedClients).toBe(0);
    const later = await grants.sweep({ now: new Date(Date.now() + 61 * 60_000) });
    expect(later.unusedClients).toBe(registered.length - 1);
    const kept = await Promise.all(registered.map((id) => grants.clients.get(id)));
    expect(kept.filter(Boolean).map((c) => c!.id)).toEqual([registered.at(-1)]);
  });
});
