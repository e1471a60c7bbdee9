// A server's tool rules, as the real SDK client meets them through a broker started from a
// configuration file: tools/list shows each user only what they may call, a refused call gets a
// JSON-RPC error naming the tool and never reaches the server, a call that needs a scope the token
// lacks is answered with 403 insufficient_scope and passes after the SDK's step-up, and every
// refusal is in the audit trail and the refusal metric.
//
// Who must NOT get it: bob (not in countdown's allow list) never sees or runs countdown; nobody,
// alice included, sees or runs whoami (denied); nobody runs notify without notify:send.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer, connectWithOAuth, NoRefreshProvider, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { mcpPostTo } from "../support/mcp-probe.ts";
import { expectToolRefused, stepUpFor, toolDeniedEvents, toolDeniedRefusals } from "../support/tool-rules.ts";
import { catalogueFile } from "../support/catalogue.ts";
import { INVALID_REQUEST, TOOL_NOT_PERMITTED } from "../../src/gateway/tool-calls.ts";

const METRICS = "metrics-token-of-the-tool-rules-test";
let demo: DemoMcpServer;
let t: TestBroker;
let config: ReturnType<typeof catalogueFile> | undefined;
let callback: CallbackServer;
const connected: Record<string, ConnectedClient> = {};

const mcpUrl = () => `${t.url}/mcp/demo`;

/** Alice's client keeps no refresh token, so that it can step up (NoRefreshProvider says why). */
async function connectAs(user: string): Promise<ConnectedClient> {
  const browser = new HttpBrowser();
  const answer = answerAs(user);
  const authorize = (url: URL) => browser.walk(url.href, callback.url, answer).then((landing) => void fetch(landing));
  return connectWithOAuth(mcpUrl(), callback, authorize, user === "alice" ? new NoRefreshProvider(callback.url, authorize) : undefined);
}

const toolNames = async (client: ConnectedClient) => (await client.client.listTools()).tools.map((tool) => tool.name).sort();

/** The demo server's tools/call requests so far (the 2025 SDK client sends no Mcp-Method header: counted by POSTs). */
const postsToServer = () => demo.requests.filter((r) => r.method === "POST").length;

beforeAll(async () => {
  demo = await startDemoMcpServer();
  callback = await new CallbackServer().start();
  config = catalogueFile([
    "servers:",
    "  - name: demo",
    "    title: Demo tools",
    `    url: ${demo.url}`,
    "    scopes:",
    '      "notify:send": Send notifications as you',
    "    tools:",
    '      - { match: "who*", deny: true }',
    "      - { match: countdown, allow: { users: [alice] } }",
    '      - { match: notify, requireScope: "notify:send" }',
  ]);
  const file = config.file;
  t = await startBroker({ BROKER_CONFIG: file, METRICS_TOKEN: METRICS });
  connected.alice = await connectAs("alice");
  connected.bob = await connectAs("bob");
});
afterAll(async () => {
  for (const c of Object.values(connected)) await c.client.close();
  await t?.stop();
  await callback?.close();
  await demo?.close();
  config?.remove();
});

describe("tool rules through the broker", () => {
  it("lists to each user only the tools they may call (a tool that needs a scope stays listed: the call is where one steps up)", async () => {
    expect(await toolNames(connected.alice!)).toEqual(["countdown", "echo", "notify"]);
    expect(await toolNames(connected.bob!)).toEqual(["echo", "notify"]);
  });

  it("answers a refused call with a JSON-RPC error naming the tool; the server never hears of it; audited and counted", async () => {
    const before = { posts: postsToServer(), refusals: await toolDeniedRefusals(t, METRICS) };
    for (const [user, tool] of [
      ["bob", "countdown"],
      ["alice", "whoami"],
    ] as const) {
      // Nothing of the rule is told.
      await expectToolRefused(connected[user]!, tool, {}, /alice|who\*|allow/);
    }
    expect(postsToServer()).toBe(before.posts);
    expect(await toolDeniedRefusals(t, METRICS)).toBe(before.refusals + 2);
    // The server's name labels its requests (the refused ones answered 200 with their JSON-RPC error).
    const metrics = await (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS}` } })).text();
    expect(Number(/^mab_mcp_requests_total\{server="demo",status="200"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(2);
    expect(await toolDeniedEvents(t)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ server: "demo", tool: "countdown", reason: "not-allowed" }),
        expect.objectContaining({ server: "demo", tool: "whoami", reason: "denied" }),
      ]),
    );
  });

  it("lets the allowed user call the tool", async () => {
    const result = await connected.alice!.client.callTool({ name: "countdown", arguments: { from: 1 } });
    expect(JSON.stringify(result.content)).toContain("liftoff");
  });

  it("refuses a 2026-07-28 request whose Mcp-Name header names an allowed tool while its body calls a refused one", async () => {
    const token = connected.bob!.provider.savedTokens!.access_token;
    const posts = postsToServer();
    const res = await mcpPostTo(
      mcpUrl(),
      token,
      { jsonrpc: "2.0", id: 41, method: "tools/call", params: { name: "countdown", arguments: {} } },
      { "mcp-method": "tools/call", "mcp-name": "echo", "mcp-protocol-version": "2026-07-28" },
    );
    expect(res.status).toBe(400);
    expect(postsToServer()).toBe(posts);
  });

  it("decides each call of a batch (2025-03-26 allows batches): one refused call, and nothing of the batch reaches the server", async () => {
    const posts = postsToServer();
    const res = await mcpPostTo(
      mcpUrl(),
      connected.bob!.provider.savedTokens!.access_token,
      [
        { jsonrpc: "2.0", id: 51, method: "tools/call", params: { name: "echo", arguments: { message: "in a batch" } } },
        { jsonrpc: "2.0", id: 52, method: "tools/call", params: { name: "whoami", arguments: {} } },
      ],
      { "mcp-session-id": connected.bob!.transport.sessionId!, "mcp-protocol-version": "2025-03-26" },
    );
    expect(res.status).toBe(200);
    const answers = (await res.json()) as Array<{ id: number; error: { code: number; message: string } }>;
    expect(answers.map((a) => [a.id, a.error.code])).toEqual([
      [51, INVALID_REQUEST],
      [52, TOOL_NOT_PERMITTED],
    ]);
    expect(answers[0]!.error.message).toContain('this batch also holds a call of "whoami"');
    expect(postsToServer()).toBe(posts);
  });

  it("answers a call that needs a scope with 403 insufficient_scope; after the SDK's step-up the call passes", async () => {
    const alice = connected.alice!;
    await stepUpFor(alice, callback, "notify", { message: "hi" }, "notify:send");
    const sent = await alice.client.callTool({ name: "notify", arguments: { message: "hi" } });
    expect(sent.isError).toBeFalsy();
  });
});
