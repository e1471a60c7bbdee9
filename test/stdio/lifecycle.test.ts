// The life of stdio children: limits (all users, one user) answered 503 with Retry-After; idle
// children reaped by the clock; a killed child ending its session (404) and the SDK client
// starting anew; a revoked grant's children stopped at once.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer } from "../support/mcp-oauth-client.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import {
  alive,
  answerOf,
  bearerFor,
  connectAs,
  disconnect,
  fixtureEnv,
  initializeRequest,
  MCP_HEADERS,
  modernRequest,
  nextMessage,
  openSession,
  sseMessages,
  whoami,
} from "./stdio-support.ts";
import { until } from "../support/wait.ts";

describe("stdio children over their life", () => {
  let t: TestBroker;
  let mcp: string;
  let callback: CallbackServer;
  const clock = new ManualClock();
  /** Sessions a test opened, ended after it so that the next one has both places. */
  const opened: Array<{ auth: Record<string, string>; session: string }> = [];
  beforeAll(async () => {
    // Two children at once, one per user; idle after one second of the test's clock.
    [t, callback] = await Promise.all([
      startBroker(fixtureEnv({ MCP_STDIO_MAX_PROCESSES: "2", MCP_STDIO_IDLE_SECONDS: "1" }), { clock }),
      new CallbackServer().start(),
    ]);
    mcp = `${t.url}/mcp`;
  }, 30_000);
  afterEach(async () => {
    for (const { auth, session } of opened.splice(0)) await end(auth, session);
    await until(() => t.broker.stdioSessions!.size === 0, "every session to end");
  });
  afterAll(async () => {
    await t?.stop();
    await callback?.close();
  });

  const headers = (auth: Record<string, string>, session: string) => ({
    ...MCP_HEADERS,
    ...auth,
    "mcp-session-id": session,
    "mcp-protocol-version": "2025-06-18",
  });
  const end = (auth: Record<string, string>, session: string) => fetch(mcp, { method: "DELETE", headers: headers(auth, session) }).then((r) => r.text());
  const open = async (auth: Record<string, string>) => {
    const session = await openSession(mcp, auth);
    opened.push({ auth, session });
    return session;
  };
  const initialize = (auth: Record<string, string>) => initializeRequest(mcp, auth);
  const pidOf = (session: string) => t.broker.stdioSessions!.find(session)!.child.pid;

  it("refuses a session over the per-user and the global limit with 503 and Retry-After", async () => {
    const [dave, erin, frank] = await Promise.all(["dave", "erin", "frank"].map((u) => bearerFor(t.url, u)));
    const daves = await open(dave!);
    const second = await initialize(dave!);
    expect(second.status).toBe(503);
    expect(Number(second.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(await second.json()).toMatchObject({ error: { message: expect.stringContaining("the most one user may have") } });

    await open(erin!);
    const third = await initialize(frank!);
    expect(third.status).toBe(503);
    expect(Number(third.headers.get("retry-after"))).toBeGreaterThan(0);
    expect(t.broker.stdioSessions!.size).toBe(2);

    // A place freed is a place to take.
    await end(dave!, daves);
    await open(frank!);
    expect(t.broker.stdioSessions!.size).toBe(2);
  });

  it("reaps a child idle for MCP_STDIO_IDLE_SECONDS, not one with a request in flight", async () => {
    const [gina, hank] = await Promise.all(["gina", "hank"].map((u) => bearerFor(t.url, u)));
    const idle = await open(gina!);
    const busy = await open(hank!);
    // Hank's tool call waits on a sampling answer that does not come yet.
    const call = await fetch(mcp, {
      method: "POST",
      headers: headers(hank!, busy),
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "sample", arguments: {} } }),
    });
    const stream = sseMessages(call);
    const sampling = await nextMessage(stream);
    const [idlePid, busyPid] = [pidOf(idle), pidOf(busy)];

    clock.advance(1500);
    await until(() => !alive(idlePid), "the idle child to be reaped");
    expect(alive(busyPid)).toBe(true);
    const gone = await fetch(mcp, { method: "POST", headers: headers(gina!, idle), body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }) });
    expect(gone.status).toBe(404);

    // The busy one finishes its call and goes on.
    await fetch(mcp, {
      method: "POST",
      headers: headers(hank!, busy),
      body: JSON.stringify({ jsonrpc: "2.0", id: sampling.id, result: { role: "assistant", content: { type: "text", text: "late" }, model: "m" } }),
    });
    expect((await nextMessage(stream)).result).toMatchObject({ content: [{ text: "late" }] });
    opened.splice(0, 1);
  });

  it("ends the session of a killed child with 404; the SDK client initializes a new one and goes on", async () => {
    const ivy = await connectAs(t.url, "ivy", callback);
    try {
      const first = await whoami(ivy.client);
      process.kill(first.pid, "SIGKILL");
      await until(() => t.broker.stdioSessions!.size === 0, "the session of the killed child to end");
      await expect(whoami(ivy.client)).rejects.toThrow(/404|Session not found/);

      // What a client does on 404 (transport spec): a new session, same authorization.
      await ivy.client.close();
      const again = new Client({ name: "again", version: "1" });
      const transport = new StreamableHTTPClientTransport(new URL(mcp), { authProvider: ivy.provider });
      await again.connect(transport);
      try {
        const second = await whoami(again);
        expect(second.pid).not.toBe(first.pid);
        expect(second.token).toBe(first.token);
      } finally {
        await transport.terminateSession();
        await again.close();
      }
    } finally {
      await disconnect(ivy);
    }
    await until(() => t.broker.stdioSessions!.size === 0, "the sessions to end");
  });

  it("reaps the warm child of requests without a session (MCP 2026-07-28) when idle, and a revoked grant's at once", async () => {
    const [kara, liam] = await Promise.all(["kara", "liam"].map((u) => bearerFor(t.url, u)));
    const pidOf = async (auth: Record<string, string>, id: number) => {
      const answer = await answerOf(await modernRequest(mcp, auth, id, "tools/call", { name: "whoami", arguments: {} }), id);
      return (JSON.parse((answer.result as { content: Array<{ text: string }> }).content[0]!.text) as { pid: number }).pid;
    };
    const [karas, liams] = [await pidOf(kara!, 1), await pidOf(liam!, 1)];
    expect(await pidOf(kara!, 2)).toBe(karas);

    clock.advance(1500);
    await until(() => !alive(karas) && !alive(liams), "the idle children to be reaped");
    const again = await pidOf(kara!, 3);
    expect(again).not.toBe(karas);

    await t.broker.services.grants.lifecycle.revokeSubject("demo:kara", "operator");
    await until(() => !alive(again), "the revoked grant's child to stop", 2000);
  });

  it("stops a revoked grant's children at once", async () => {
    const jack = await connectAs(t.url, "jack", callback);
    try {
      const { pid } = await whoami(jack.client);
      const grants = t.broker.services.grants;
      await grants.lifecycle.revokeSubject("demo:jack", "operator");
      await until(() => !alive(pid), "the revoked grant's child to stop", 2000);
      expect(t.broker.stdioSessions!.size).toBe(0);
    } finally {
      await jack.client.close();
    }
  });
});
