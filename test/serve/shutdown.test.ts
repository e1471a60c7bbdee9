// Ctrl-C with MCP streams open: the broker says what it waits for and until when, ends the streams
// as the protocol allows (a JSON-RPC error for a request still unanswered, a plain end for the GET
// stream of server messages), and a second Ctrl-C stops it at once.
import { afterAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { initializeAs } from "../support/mcp-probe.ts";
import { sseEvents } from "../gateway/harness.ts";

const PROTOCOL = "2025-06-18";

interface OpenStreams {
  /** The GET stream of server messages: resolves when it has ended ("cut": the connection was cut instead). */
  readonly listeningEnded: Promise<"ended" | "cut">;
  /** The events of a tools/call still counting down (request id 7), after its first progress event. */
  readonly answering: AsyncGenerator<{ data: string }>;
}

/** An MCP session with a GET stream and a tools/call whose answer is a minute away. */
async function openStreams(url: string, user: string): Promise<OpenStreams> {
  const { tokens } = await obtainTokens(url, { user });
  const headers = { authorization: `Bearer ${tokens.access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" };
  const init = await fetch(`${url}/mcp`, {
    method: "POST",
    headers,
    body: JSON.stringify(initializeAs({ name: "t", version: "1" }, PROTOCOL)),
  });
  const session = { ...headers, "mcp-session-id": init.headers.get("mcp-session-id")!, "mcp-protocol-version": PROTOCOL };
  await init.text();
  await (await fetch(`${url}/mcp`, { method: "POST", headers: session, body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) })).text();
  const listening = await fetch(`${url}/mcp`, { headers: { ...session, accept: "text/event-stream" } });
  expect(listening.status).toBe(200);
  const call = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: session,
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: "countdown", arguments: { from: 3, intervalMs: 60_000 }, _meta: { progressToken: "p" } },
    }),
  });
  expect(call.headers.get("content-type")).toContain("text/event-stream");
  const answering = sseEvents(call.body);
  // The first progress event: the stream is open and waiting for the next step.
  expect(JSON.parse((await answering.next()).value!.data).method).toBe("notifications/progress");
  const listeningEnded = (async () => {
    try {
      for await (const _ of sseEvents(listening.body)) {
        // No server message is sent in these tests.
      }
      return "ended" as const;
    } catch {
      return "cut" as const;
    }
  })();
  return { listeningEnded, answering };
}

describe("shutdown of the real process with MCP streams open", () => {
  let broker: BrokerProcess | undefined;
  afterAll(async () => broker?.kill());

  it("Ctrl-C says how many streams it drains and until when, ends the GET stream at once; a second Ctrl-C stops at once (exit 130)", async () => {
    broker = await startBrokerProcess(mkdtempSync(path.join(tmpdir(), "mab-shutdown-")), { LOG_LEVEL: "info" });
    const streams = await openStreams(broker.url, "ctrl-c");
    broker.child.kill("SIGINT");
    expect(await streams.listeningEnded).toBe("ended");
    expect(broker.output()).toMatch(
      /shutting down \(SIGINT\): draining 1 request\(s\) in flight, 1 of them MCP stream\(s\) \(a JSON-RPC error ends any still open at the deadline\), for at most 10 s; 1 MCP event stream\(s\) with no request pending end now; press Ctrl-C again to stop at once/,
    );
    broker.child.kill("SIGINT");
    expect(await broker.exited).toEqual({ code: 130, signal: null });
    expect(broker.output()).toMatch(/second SIGINT: stopping at once/);
  });

  it("a second SIGTERM exits with 143", async () => {
    const other = await startBrokerProcess(mkdtempSync(path.join(tmpdir(), "mab-shutdown-")), { LOG_LEVEL: "info" });
    try {
      const streams = await openStreams(other.url, "term");
      other.child.kill("SIGTERM");
      expect(await streams.listeningEnded).toBe("ended");
      expect(other.output()).toMatch(/shutting down \(SIGTERM\): draining .* send SIGTERM again to stop at once/);
      other.child.kill("SIGTERM");
      expect(await other.exited).toEqual({ code: 143, signal: null });
    } finally {
      await other.kill();
    }
  });
});

describe("the streams a stop ends", () => {
  let t: TestBroker | undefined;
  let stopped = false;
  afterAll(async () => {
    if (!stopped) await t?.stop();
  });

  it("a request still unanswered at the deadline gets a JSON-RPC error for its id, after the GET stream has ended", async () => {
    t = await startBroker();
    const streams = await openStreams(t.url, "deadline");
    const order: string[] = [];
    void streams.listeningEnded.then((how) => order.push(`listening ${how}`));
    stopped = true;
    const stopping = t.broker.stop(1000);
    const events: unknown[] = [];
    for await (const event of streams.answering) events.push(JSON.parse(event.data));
    order.push("answering ended");
    await stopping;
    expect(events).toEqual([{ jsonrpc: "2.0", id: 7, error: { code: -32603, message: "The broker is shutting down; please retry." } }]);
    expect(order).toEqual(["listening ended", "answering ended"]);
  });
});
