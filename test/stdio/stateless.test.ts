// MCP 2026-07-28 drops initialize and sessions. The stdio bridge serves such requests from a warm
// child of the caller's grant, which it initialized itself in the child's own (earlier) revision:
// a stdio server written for 2025-06-18 works behind the MCP SDK v2 client pinned to 2026-07-28 or
// negotiating (`auto`), through its real OAuth flow, while the v1 client keeps its sessions on the
// same /mcp. Two users get two children, each with its own token only.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Client as V2Client } from "@modelcontextprotocol/client";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer } from "../support/mcp-oauth-client.ts";
import { connectV2WithOAuth, type Era, type V2Connection } from "../support/v2-client.ts";
import {
  answerOf,
  bearerFor,
  connectAs,
  disconnect,
  fixtureEnv,
  MODERN,
  modernRequest,
  nextMessage,
  signInAs,
  sseMessages,
  whoami,
  type Whoami,
} from "./stdio-support.ts";

interface Received {
  readonly method: string;
  readonly tool?: string;
  readonly message?: string;
  readonly metaKeys: string[];
}

/** The text of a v2 client's tool call. */
async function v2Text(client: V2Client, name: string, args: Record<string, unknown> = {}): Promise<string> {
  const result = await client.callTool({ name, arguments: args });
  const first = (result.content as Array<{ type: string; text?: string }>)[0];
  if (first?.type !== "text" || first.text === undefined) throw new Error(`${name} answered no text: ${JSON.stringify(result)}`);
  return first.text;
}
const v2Whoami = async (client: V2Client): Promise<Whoami> => JSON.parse(await v2Text(client, "whoami")) as Whoami;
const v2Received = async (client: V2Client): Promise<Received[]> => JSON.parse(await v2Text(client, "received")) as Received[];

describe("MCP 2026-07-28 clients in front of a stdio server written for 2025-06-18", () => {
  let t: TestBroker;
  let callback: CallbackServer;
  const clients: V2Connection[] = [];
  beforeAll(async () => {
    [t, callback] = await Promise.all([startBroker(fixtureEnv({ MCP_SERVER_ENV: "ANSWER_PROTOCOL_VERSION=2025-06-18" })), new CallbackServer().start()]);
  }, 30_000);
  afterAll(async () => {
    for (const c of clients) await c.client.close().catch(() => undefined);
    await t?.stop();
    await callback?.close();
  });

  const connectV2 = async (user: string, era: Era) => {
    const connected = await connectV2WithOAuth(`${t.url}/mcp`, era, callback, signInAs(user, callback));
    clients.push(connected);
    return connected.client;
  };
  /** The user's upstream access token as the broker holds it. */
  const upstreamTokenOf = async (login: string) => {
    const session = await t.broker.database.db.upstreamSession.findFirstOrThrow({ where: { login }, orderBy: { createdAt: "desc" } });
    return (await t.broker.services.grants.sessions.tokensOf(session.id))?.accessToken;
  };
  const statelessChildOf = (pid: number) => t.broker.stdioSessions!.statelessChildren().find((c) => c.child.pid === pid);

  it("serves the v2 client pinned to 2026-07-28: discovery, tools/list, tools/call, from one warm child", async () => {
    const client = await connectV2("alice", MODERN);
    expect(client.getProtocolEra()).toBe("modern");
    expect(client.getNegotiatedProtocolVersion()).toBe(MODERN);
    expect(client.getServerVersion()).toMatchObject({ name: "stdio-fixture" });

    const { tools } = await client.listTools();
    expect(tools.map((tool) => tool.name)).toEqual(expect.arrayContaining(["whoami", "echo", "progress"]));
    expect(await v2Text(client, "echo", { message: "hello from 2026" })).toBe("hello from 2026");
    const me = await v2Whoami(client);
    expect(me.token).toBe(await upstreamTokenOf("alice"));

    // One warm child, initialized by the bridge in the revision the server speaks, kept for the next call.
    const child = statelessChildOf(me.pid);
    expect(child?.childProtocolVersion).toBe("2025-06-18");
    expect((await v2Whoami(client)).pid).toBe(me.pid);

    // The server saw an ordinary 2025-06-18 client: one initialize, no server/discover, no 2026 envelope.
    const received = await v2Received(client);
    expect(received.filter((r) => r.method === "initialize")).toHaveLength(1);
    expect(received.map((r) => r.method)).not.toContain("server/discover");
    expect(received.flatMap((r) => r.metaKeys).filter((k) => k.startsWith("io.modelcontextprotocol/"))).toEqual([]);
  });

  it("serves the v2 client that negotiates (auto) statelessly, and the v1 client with a session on the same /mcp", async () => {
    const modern = await connectV2("bob", "auto");
    expect(modern.getProtocolEra()).toBe("modern");
    expect(await v2Text(modern, "echo", { message: "auto" })).toBe("auto");

    const legacy = await connectAs(t.url, "carol", callback);
    try {
      expect(legacy.transport.sessionId).toBeDefined();
      const me = await whoami(legacy.client);
      expect(t.broker.stdioSessions!.find(legacy.transport.sessionId!)?.child.pid).toBe(me.pid);
      expect(me.token).toBe(await upstreamTokenOf("carol"));
    } finally {
      await disconnect(legacy);
    }
  });

  it("gives two users two children, each started with its own token, and never sends one's request to the other's", async () => {
    const [dave, erin] = await Promise.all([connectV2("dave", MODERN), connectV2("erin", MODERN)]);
    const [d, e] = await Promise.all([v2Whoami(dave), v2Whoami(erin)]);
    expect(d.pid).not.toBe(e.pid);
    expect(d.token).toBe(await upstreamTokenOf("dave"));
    expect(e.token).toBe(await upstreamTokenOf("erin"));
    expect(d.token).not.toBe(e.token);
    expect(statelessChildOf(d.pid)?.owner.key).toBe("demo:dave");
    expect(statelessChildOf(e.pid)?.owner.key).toBe("demo:erin");

    await v2Text(dave, "echo", { message: "for dave's child only" });
    expect((await v2Received(erin)).map((r) => r.message)).not.toContain("for dave's child only");
    expect((await v2Received(dave)).map((r) => r.message)).toContain("for dave's child only");
  });

  it("streams a tool's progress to its caller over SSE and answers in the revision's shape", async () => {
    const auth = await bearerFor(t.url, "gil");
    const mcp = `${t.url}/mcp`;
    // Two requests with the same client progress token at once: each gets its own progress.
    const [a, b] = await Promise.all(
      [1, 2].map((id) => modernRequest(mcp, auth, id, "tools/call", { name: "progress", arguments: { steps: 3 } }, { meta: { progressToken: "tok" } })),
    );
    for (const [res, id] of [
      [a!, 1],
      [b!, 2],
    ] as const) {
      expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const stream = sseMessages(res);
      for (let step = 1; step <= 3; step++) {
        expect(await nextMessage(stream)).toMatchObject({ method: "notifications/progress", params: { progressToken: "tok", progress: step, total: 3 } });
      }
      expect(await nextMessage(stream)).toMatchObject({
        id,
        result: {
          resultType: "complete",
          content: [{ text: "done after 3 steps" }],
          _meta: { "io.modelcontextprotocol/serverInfo": { name: "stdio-fixture" } },
        },
      });
    }

    // Without notifications, one JSON object; list results say how long they may be cached, and by whom.
    const list = await modernRequest(mcp, auth, 3, "tools/list");
    expect(list.headers.get("content-type")).toMatch(/^application\/json/);
    expect(await answerOf(list, 3)).toMatchObject({ id: 3, result: { resultType: "complete", ttlMs: 0, cacheScope: "private" } });
  });

  it("refuses what the revision refuses before any child hears of it", async () => {
    const auth = await bearerFor(t.url, "fay");
    const before = t.broker.stdioSessions!.size;
    const post = (headers: Record<string, string>, body: unknown) =>
      fetch(`${t.url}/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...auth, ...headers },
        body: JSON.stringify(body),
      });
    const envelope = (version: string) => ({
      "io.modelcontextprotocol/protocolVersion": version,
      "io.modelcontextprotocol/clientCapabilities": {},
    });
    const request = (version: string, method = "tools/list") => ({ jsonrpc: "2.0", id: 5, method, params: { _meta: envelope(version) } });

    // MCP-Protocol-Version must name the body's version (HeaderMismatch).
    const mismatch = await post({ "mcp-protocol-version": "2025-06-18", "mcp-method": "tools/list" }, request(MODERN));
    expect(mismatch.status).toBe(400);
    expect(await mismatch.json()).toMatchObject({ id: 5, error: { code: -32020 } });
    // The header is required with the envelope (a server that reads the body checks both).
    const missing = await post({ "mcp-method": "tools/list" }, request(MODERN));
    expect(missing.status).toBe(400);
    expect(await missing.json()).toMatchObject({ id: 5, error: { code: -32020 } });
    // A version the bridge does not serve: the list of those it does.
    const unknown = await post({ "mcp-protocol-version": "2099-01-01", "mcp-method": "tools/list" }, request("2099-01-01"));
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ error: { code: -32022, data: { supported: [MODERN], requested: "2099-01-01" } } });
    // Removed in 2026-07-28.
    const ping = await post({ "mcp-protocol-version": MODERN, "mcp-method": "ping" }, request(MODERN, "ping"));
    expect(ping.status).toBe(404);
    expect(await ping.json()).toMatchObject({ error: { code: -32601 } });
    expect(t.broker.stdioSessions!.size).toBe(before);
  });
});
