// The MCP proxy end to end: the real MCP SDK client → Koa app with the proxy → the demo MCP
// server (real SDK server), all over real HTTP on 127.0.0.1.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { LoggingMessageNotificationSchema, type LoggingMessageNotification } from "@modelcontextprotocol/sdk/types.js";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { connectClient, sessionHeaders, sseEvents, startGateway, toolText, type ConnectedClient, type TestGateway } from "./harness.ts";
import { until, within } from "../support/wait.ts";

const FORGED = {
  authorization: "Bearer broker-access-token",
  cookie: "broker_session=secret",
  "x-auth-subject": "forged:root",
  "x-auth-user": "root",
  "x-auth-client-id": "forged-client",
  "x-auth-scopes": "admin",
  "x-upstream-access-token": "forged-upstream-token",
  "x-forwarded-for": "6.6.6.6",
  "x-forwarded-host": "evil.example",
  "x-forwarded-proto": "gopher",
  forwarded: "for=6.6.6.6;host=evil.example",
};

/** Lets the countdown test hold the demo server between steps; inert otherwise. */
let countdownGate: ((remaining: number) => Promise<void>) | undefined;

let demo: DemoMcpServer;
let gateway: TestGateway;
const clients: ConnectedClient[] = [];

async function connect(headers: Record<string, string>, options?: { standaloneStream?: boolean }): Promise<ConnectedClient> {
  const c = await connectClient(gateway.url, headers, options);
  clients.push(c);
  return c;
}

function recordsOf(user: string) {
  return demo.requests.filter((r) => r.headers["x-auth-user"] === user);
}

beforeAll(async () => {
  demo = await startDemoMcpServer({ beforeCountdownStep: ({ remaining }) => countdownGate?.(remaining) });
  gateway = await startGateway({ targetUrl: demo.url });
});

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.client.close()));
  await gateway.close();
  await demo.close();
});

describe("MCP proxy with the real SDK client", () => {
  it("lists and calls tools", async () => {
    const { client } = await connect({ "x-test-user": "lister" });
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual(["countdown", "echo", "notify", "whoami"]);
    expect(toolText(await client.callTool({ name: "echo", arguments: { message: "hello through the broker" } }))).toBe("hello through the broker");
  });

  it("tells the MCP server who calls, and never lets credentials or forged identity through", async () => {
    const { client } = await connect({ "x-test-user": "alice", "x-test-client": "client-a", ...FORGED });
    const seen = JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} })));
    expect(seen).toMatchObject({
      subject: "test:alice",
      user: "alice",
      clientId: "client-a",
      scopes: "mcp profile",
      upstreamAccessTokenPresent: false,
      authorization: null,
      cookie: null,
      forwarded: null,
      forwardedFor: "127.0.0.1",
      forwardedProto: "http",
    });
    expect(seen.forwardedHost).toMatch(/^127\.0\.0\.1:\d+$/);

    const records = recordsOf("alice");
    expect(records.length).toBeGreaterThanOrEqual(3); // initialize, initialized, GET stream, tools/call
    for (const { headers } of records) {
      expect(headers.authorization).toBeUndefined();
      expect(headers.cookie).toBeUndefined();
      expect(headers.forwarded).toBeUndefined();
      expect(headers["x-upstream-access-token"]).toBeUndefined();
      expect(headers["x-test-user"]).toBeUndefined();
      expect(headers["x-auth-subject"]).toBe("test:alice");
      expect(headers["x-auth-client-id"]).toBe("client-a");
      expect(headers["x-auth-scopes"]).toBe("mcp profile");
      expect(headers["x-forwarded-for"]).toBe("127.0.0.1");
      expect(headers["x-forwarded-proto"]).toBe("http");
      expect(headers["x-forwarded-host"]).not.toBe("evil.example");
    }
  });

  it("sends no subject or user for a client_credentials caller", async () => {
    const { client } = await connect({ "x-test-client": "machine-client" });
    const seen = JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} })));
    expect(seen).toMatchObject({ subject: null, user: null, clientId: "machine-client", scopes: "mcp" });
  });

  it("forwards the upstream access token only when configured to", async () => {
    const forwarding = await startGateway({ targetUrl: demo.url, forwardUpstreamToken: true });
    try {
      const c = await connectClient(forwarding.url, { "x-test-user": "gh-user", "x-upstream-access-token": "forged" });
      clients.push(c);
      const seen = JSON.parse(toolText(await c.client.callTool({ name: "whoami", arguments: {} })));
      expect(seen.upstreamAccessTokenPresent).toBe(true);
      const records = recordsOf("gh-user");
      expect(records.length).toBeGreaterThan(0);
      for (const { headers } of records) expect(headers["x-upstream-access-token"]).toBe("upstream-token-of-gh-user");
      await c.client.close();
    } finally {
      await forwarding.close();
    }
  });

  it("delivers each progress notification before the MCP server produces the next step or the result", async () => {
    const { client } = await connect({ "x-test-user": "countdown" });
    const sequence: string[] = [];
    const received = new Map<number, () => void>();
    const receivedPromise = (progress: number) => new Promise<void>((resolve) => received.set(progress, resolve));
    const from = 3;
    const waiting = new Map<number, Promise<void>>();
    for (let p = 1; p <= from; p++) waiting.set(p, receivedPromise(p));
    // The server emits step `remaining` only once the client holds the previous step: a proxy
    // that buffered the stream would leave it waiting and the sequence would come out wrong.
    countdownGate = async (remaining) => {
      const previous = waiting.get(from - remaining);
      if (previous) await within(previous, 3000, "the previous step at the client").catch(() => {});
      sequence.push(`server emits ${remaining === 0 ? "result" : `step ${from - remaining + 1}`}`);
    };
    try {
      const result = await client.callTool({ name: "countdown", arguments: { from, intervalMs: 0 } }, undefined, {
        onprogress: (p) => {
          sequence.push(`client got step ${p.progress}`);
          received.get(p.progress)?.();
        },
      });
      sequence.push("client got result");
      expect(toolText(result)).toBe("liftoff");
    } finally {
      countdownGate = undefined;
    }
    expect(sequence).toEqual([
      "server emits step 1",
      "client got step 1",
      "server emits step 2",
      "client got step 2",
      "server emits step 3",
      "client got step 3",
      "server emits result",
      "client got result",
    ]);
  });

  it("flushes the standalone GET stream's headers at once and delivers server notifications on it", async () => {
    const c = await connect({ "x-test-user": "listener" });
    const messages: LoggingMessageNotification["params"][] = [];
    c.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      messages.push(n.params);
    });
    // The GET stream is silent until the server sends something: its headers must still arrive.
    await within(c.standaloneStreamOpen, 5000, "the GET stream's response headers");
    expect(toolText(await c.client.callTool({ name: "notify", arguments: { message: "server says hi" } }))).toBe("sent");
    await until(() => messages.length > 0, "the logging notification");
    expect(messages[0]).toMatchObject({ level: "info", data: "server says hi" });
    const get = recordsOf("listener").find((r) => r.method === "GET");
    expect(get?.headers.accept).toContain("text/event-stream");
  });

  it("ends the session with DELETE and releases its binding", async () => {
    const { client, transport } = await connect({ "x-test-user": "leaver" });
    await client.listTools();
    const sessionId = transport.sessionId!;
    expect(await gateway.binding.ownerOf(sessionId)).toBe("test:leaver");
    await transport.terminateSession();
    expect(recordsOf("leaver").some((r) => r.method === "DELETE" && r.headers["mcp-session-id"] === sessionId)).toBe(true);
    expect(await gateway.binding.ownerOf(sessionId)).toBeUndefined();
    const after = await fetch(gateway.url, {
      method: "POST",
      headers: { "x-test-user": "leaver", "mcp-session-id": sessionId, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(after.status).toBe(404);
  });

  it("resumes the standalone stream with Last-Event-ID, replaying the events missed", async () => {
    const { client, transport } = await connect({ "x-test-user": "resumer" }, { standaloneStream: false });
    const getHeaders = sessionHeaders(transport, { "x-test-user": "resumer", accept: "text/event-stream", "user-agent": "resume-1" });

    const first = new AbortController();
    const stream1 = await fetch(gateway.url, { headers: getHeaders, signal: first.signal });
    expect(stream1.status).toBe(200);
    const events1 = sseEvents(stream1.body);
    await client.callTool({ name: "notify", arguments: { message: "one" } });
    const one = (await events1.next()).value!;
    expect(JSON.parse(one.data).params.data).toBe("one");
    expect(one.id).toBeTruthy();

    first.abort();
    await events1.return(undefined).catch(() => {});
    await until(() => demo.requests.some((r) => r.headers["user-agent"] === "resume-1" && r.closedEarly), "the MCP server to see the GET close");

    await client.callTool({ name: "notify", arguments: { message: "two" } });
    await client.callTool({ name: "notify", arguments: { message: "three" } });

    const second = new AbortController();
    const stream2 = await fetch(gateway.url, {
      headers: { ...getHeaders, "user-agent": "resume-2", "last-event-id": one.id! },
      signal: second.signal,
    });
    expect(stream2.status).toBe(200);
    const events2 = sseEvents(stream2.body);
    const replayed = [(await events2.next()).value!, (await events2.next()).value!];
    expect(replayed.map((e) => JSON.parse(e.data).params.data)).toEqual(["two", "three"]);
    expect(demo.requests.find((r) => r.headers["user-agent"] === "resume-2")?.headers["last-event-id"]).toBe(one.id);
    second.abort();
    await events2.return(undefined).catch(() => {});
  });
});

describe("MCP session binding", () => {
  it("refuses a session id used by another user, without forwarding the request", async () => {
    const { client, transport } = await connect({ "x-test-user": "owner-a" });
    await client.listTools();
    const before = demo.requests.length;
    const asB = (extra: Record<string, string>) => sessionHeaders(transport, { "x-test-user": "intruder-b", ...extra });
    const attempts = [
      fetch(gateway.url, {
        method: "POST",
        headers: asB({ "content-type": "application/json", accept: "application/json, text/event-stream" }),
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "whoami", arguments: {} } }),
      }),
      fetch(gateway.url, { headers: asB({ accept: "text/event-stream" }) }),
      fetch(gateway.url, { method: "DELETE", headers: asB({}) }),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({ jsonrpc: "2.0", error: { code: -32000, message: "Mcp-Session-Id belongs to another user" }, id: null });
    }
    expect(demo.requests.length).toBe(before);
    // A client_credentials caller of another client is another owner too.
    const machine = await fetch(gateway.url, { method: "DELETE", headers: sessionHeaders(transport, { "x-test-client": "owner-a" }) });
    expect(machine.status).toBe(403);
    // The owner still uses it.
    expect((await client.listTools()).tools.length).toBe(4);
  });

  it("answers an id the MCP server never issued 404 itself, forwarding nothing", async () => {
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: {
        "x-test-user": "stranger",
        "mcp-session-id": "no-such-session",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32001, message: expect.stringMatching(/^Session not found/) } });
    expect(recordsOf("stranger")).toEqual([]);
    expect(await gateway.binding.ownerOf("no-such-session")).toBeUndefined();
  });
});

describe("MCP proxy streaming and limits", () => {
  it("aborts the upstream request when the client disconnects mid-stream", async () => {
    const { transport } = await connect({ "x-test-user": "quitter" }, { standaloneStream: false });
    const controller = new AbortController();
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: sessionHeaders(transport, {
        "x-test-user": "quitter",
        "user-agent": "disconnect-test",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
      }),
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "tools/call",
        params: { name: "countdown", arguments: { from: 1000, intervalMs: 20 }, _meta: { progressToken: "p" } },
      }),
      signal: controller.signal,
    });
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const events = sseEvents(res.body);
    let event = (await events.next()).value!;
    while (!event.data) event = (await events.next()).value!; // skip the priming event
    expect(JSON.parse(event.data).method).toBe("notifications/progress");
    controller.abort();
    await events.return(undefined).catch(() => {});
    await until(() => demo.requests.some((r) => r.headers["user-agent"] === "disconnect-test" && r.closedEarly), "the MCP server to see the connection close");
    await transport.terminateSession(); // stops the countdown server-side
  });

  it("streams a large request body (5 MB) to the MCP server", async () => {
    const { client } = await connect({ "x-test-user": "bulk" });
    const message = "x".repeat(5 * 1024 * 1024);
    const result = await client.callTool({ name: "echo", arguments: { message } });
    expect(toolText(result).length).toBe(message.length);
  });

  it("answers 405 with Allow for other methods", async () => {
    const res = await fetch(gateway.url, { method: "PUT", headers: { "x-test-user": "putter" }, body: "{}" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, POST, DELETE");
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 }, id: null });
    expect(recordsOf("putter")).toHaveLength(0);
  });

  it("maps /mcp/sub/path and keeps the query", async () => {
    const res = await fetch(`${gateway.url}/sub/path?x=1&y=two`, { method: "POST", headers: { "x-test-user": "mapper" }, body: "{}" });
    expect(res.status).toBe(404); // the demo server only serves /mcp
    expect(recordsOf("mapper").map((r) => r.url)).toEqual(["/mcp/sub/path?x=1&y=two"]);
  });
});
