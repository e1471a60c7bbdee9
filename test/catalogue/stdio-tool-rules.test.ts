// A stdio server's tool rules, as the real SDK client (sessions, 2025 revisions) and raw MCP
// 2026-07-28 requests (stateless, the grant's warm child) meet them through a broker started from
// a configuration file: the same front end as for a Streamable HTTP server. tools/list answers the
// bridge writes itself (SSE in a session, JSON or SSE stateless) show each user only what they may
// call; a refused call gets the JSON-RPC error naming the tool and never reaches the child (the
// fixture's `received` tool lists everything its process was sent); a call that needs a scope the
// token lacks gets 403 insufficient_scope and passes after the SDK's step-up; an Mcp-Name header
// that disagrees with the body is refused; every refusal is audited and counted.
//
// Who must NOT get it: bob (not in stderr's allow list) never sees or runs stderr; nobody, alice
// included, sees or runs whoami (denied); nobody runs log without notify:send.
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer, connectWithOAuth, NoRefreshProvider, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { mcpPostTo } from "../support/mcp-probe.ts";
import { until } from "../support/wait.ts";
import { expectToolRefused, stepUpFor, toolDeniedEvents, toolDeniedRefusals } from "../support/tool-rules.ts";
import { answerOf, callText, fixtureCommand, MODERN, modernRequest, signInAs } from "../stdio/stdio-support.ts";
import { catalogueFile } from "../support/catalogue.ts";

const METRICS = "metrics-token-of-the-stdio-tool-rules-test";
/** Every tool of the fixture stdio server (test/fixtures/stdio-server.js). */
const FIXTURE_TOOLS = ["cancellations", "echo", "flood", "hang", "log", "progress", "received", "sample", "stderr", "whoami"];
const without = (...hidden: string[]) => FIXTURE_TOOLS.filter((tool) => !hidden.includes(tool));

let t: TestBroker;
let config: ReturnType<typeof catalogueFile> | undefined;
let callback: CallbackServer;
/** The broker's log (at info: the access lines). */
let logged = "";
const connected: Record<string, ConnectedClient> = {};

const mcpUrl = () => `${t.url}/mcp/tools`;
const bearer = (user: string) => ({ authorization: `Bearer ${connected[user]!.provider.savedTokens!.access_token}` });

/** Alice's client keeps no refresh token, so that it can step up (NoRefreshProvider says why). */
function connectAs(user: string): Promise<ConnectedClient> {
  const authorize = signInAs(user, callback);
  return connectWithOAuth(mcpUrl(), callback, authorize, user === "alice" ? new NoRefreshProvider(callback.url, authorize) : undefined);
}

const toolNames = async (client: ConnectedClient) => (await client.client.listTools()).tools.map((tool) => tool.name).sort();

/** The tools/call requests the session's child process was sent, by tool name. */
async function toolsCalledInChild(client: ConnectedClient): Promise<string[]> {
  const received = JSON.parse(await callText(client.client, "received")) as { method: string; tool?: string }[];
  return received.filter((m) => m.method === "tools/call").map((m) => m.tool!);
}

/** The same, for the warm child serving `user`'s 2026-07-28 requests. */
async function toolsCalledInStatelessChild(user: string): Promise<string[]> {
  const answer = await answerOf(await modernRequest(mcpUrl(), bearer(user), 900, "tools/call", { name: "received", arguments: {} }), 900);
  const text = (answer.result as { content: { text: string }[] }).content[0]!.text;
  return (JSON.parse(text) as { method: string; tool?: string }[]).filter((m) => m.method === "tools/call").map((m) => m.tool!);
}

beforeAll(async () => {
  callback = await new CallbackServer().start();
  config = catalogueFile([
    "servers:",
    "  - name: tools",
    "    title: Local tools",
    `    command: ${JSON.stringify(fixtureCommand)}`,
    "    scopes:",
    '      "notify:send": Send notifications as you',
    "    tools:",
    '      - { match: "who*", deny: true }',
    "      - { match: stderr, allow: { users: [alice] } }",
    '      - { match: log, requireScope: "notify:send" }',
  ]);
  const file = config.file;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged += chunk.toString();
      done();
    },
  });
  t = await startBroker({ BROKER_CONFIG: file, METRICS_TOKEN: METRICS, LOG_LEVEL: "info" }, { logDestination: sink });
  connected.alice = await connectAs("alice");
  connected.bob = await connectAs("bob");
}, 30_000);
afterAll(async () => {
  for (const c of Object.values(connected)) await c.client.close();
  await t?.stop();
  await callback?.close();
  config?.remove();
});

describe("tool rules on a stdio server", () => {
  it("lists to each user only the tools they may call, in a session (SSE) and stateless (JSON and SSE)", async () => {
    expect(await toolNames(connected.alice!)).toEqual(without("whoami"));
    expect(await toolNames(connected.bob!)).toEqual(without("whoami", "stderr"));
    for (const accept of ["application/json", "text/event-stream"]) {
      const res = await modernRequest(mcpUrl(), { ...bearer("bob"), accept }, 7, "tools/list");
      expect(res.headers.get("content-type")).toContain(accept);
      const answer = await answerOf(res, 7);
      const result = answer.result as { tools: { name: string }[]; cacheScope: string };
      expect(result.tools.map((tool) => tool.name).sort()).toEqual(without("whoami", "stderr"));
      expect(result.cacheScope).toBe("private");
    }
  });

  it("answers a refused call with a JSON-RPC error naming the tool; the child never hears of it; audited and counted", async () => {
    const before = await toolDeniedRefusals(t, METRICS);
    for (const [user, tool] of [
      ["bob", "stderr"],
      ["alice", "whoami"],
    ] as const) {
      // Nothing of the rule is told.
      await expectToolRefused(connected[user]!, tool, { lines: 1 }, /alice|who\*|allow/);
      expect(await toolsCalledInChild(connected[user]!)).not.toContain(tool);
    }
    // Stateless, the grant's warm child: refused the same way, before it.
    const answer = await answerOf(await modernRequest(mcpUrl(), bearer("bob"), 8, "tools/call", { name: "stderr", arguments: { lines: 1 } }), 8);
    expect(answer.error).toMatchObject({ code: -32602, message: expect.stringContaining('"stderr" is not permitted for you') });
    expect(await toolsCalledInStatelessChild("bob")).not.toContain("stderr");
    expect(await toolDeniedRefusals(t, METRICS)).toBe(before + 3);
    expect(await toolDeniedEvents(t)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ server: "tools", tool: "stderr", reason: "not-allowed" }),
        expect.objectContaining({ server: "tools", tool: "whoami", reason: "denied" }),
      ]),
    );
  });

  it("lets the allowed user call the tool", async () => {
    expect(await callText(connected.alice!.client, "stderr", { lines: 1 })).toBe("written");
    expect(await toolsCalledInChild(connected.alice!)).toContain("stderr");
  });

  it("refuses a 2026-07-28 request whose Mcp-Name header names an allowed tool while its body calls a refused one", async () => {
    const res = await mcpPostTo(
      mcpUrl(),
      connected.bob!.provider.savedTokens!.access_token,
      {
        jsonrpc: "2.0",
        id: 41,
        method: "tools/call",
        params: { name: "stderr", arguments: { lines: 1 }, _meta: { "io.modelcontextprotocol/protocolVersion": MODERN } },
      },
      { "mcp-method": "tools/call", "mcp-name": "echo", "mcp-protocol-version": MODERN },
    );
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ id: 41, error: { code: -32020, message: expect.stringContaining("Mcp-Name") } });
    expect(await toolsCalledInStatelessChild("bob")).not.toContain("stderr");
  });

  it("answers a call that needs a scope with 403 insufficient_scope; after the SDK's step-up the call passes", async () => {
    const alice = connected.alice!;
    // Nothing reaches the child before the user consents.
    await stepUpFor(alice, callback, "log", { message: "hi" }, "notify:send", async () => {
      expect(await toolsCalledInChild(alice)).not.toContain("log");
    });
    expect(await callText(alice.client, "log", { message: "hi" })).toBe("logged");
  });

  it("names a stdio request's JSON-RPC method and server in its access line, as an HTTP server's", async () => {
    const res = await modernRequest(mcpUrl(), { ...bearer("bob"), "x-request-id": "stdio-access-line-1" }, 9, "tools/list");
    await res.text();
    // Written when the response has closed on the broker's side, which may follow the client's read.
    const accessLine = () =>
      logged
        .split("\n")
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .find((line) => line.msg === "mcp" && line.requestId === "stdio-access-line-1");
    await until(() => accessLine() !== undefined, "the access line of the stdio request");
    expect(accessLine()).toMatchObject({ server: "tools", rpc: "tools/list", status: 200 });
  });
});
