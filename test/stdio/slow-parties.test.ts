// The two ends the bridge cannot hurry: a stdio server that never answers gets its request ended at
// MCP_STDIO_REQUEST_TIMEOUT_SECONDS with a JSON-RPC error (and is told to cancel it), and a client
// that reads slower than the server writes slows the server down (its stdout is no longer read)
// instead of the broker buffering everything the server writes.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { answerOf, bearerFor, fixtureEnv, MCP_HEADERS, modernRequest, nextMessage, openSession, sseMessages } from "./stdio-support.ts";
import { until } from "../support/wait.ts";

const call = (
  mcp: string,
  auth: Record<string, string>,
  session: string,
  id: number,
  name: string,
  args: Record<string, unknown> = {},
  meta?: Record<string, unknown>,
) =>
  fetch(mcp, {
    method: "POST",
    headers: { ...MCP_HEADERS, ...auth, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) } }),
  });

describe("a stdio server that never answers", () => {
  let t: TestBroker;
  let mcp: string;
  // Deadlines go by the broker's clock: the tests move it past them once the request is in the server.
  const clock = new ManualClock();
  beforeAll(async () => {
    t = await startBroker(fixtureEnv({ MCP_STDIO_REQUEST_TIMEOUT_SECONDS: "60" }), { clock });
    mcp = `${t.url}/mcp`;
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
  });

  const pastTheDeadline = async (busy: () => boolean) => {
    await until(busy, "the request to reach the server");
    clock.advance(60_000);
  };
  const cancellationsOf = (answer: Record<string, unknown>) => JSON.parse((answer.result as { content: Array<{ text: string }> }).content[0]!.text) as string[];

  it("answers a request the server never answers with a JSON-RPC error at the deadline, and cancels it in the server", async () => {
    const auth = await bearerFor(t.url, "nora");
    const session = await openSession(mcp, auth);
    const stream = sseMessages(await call(mcp, auth, session, 7, "hang"));
    await pastTheDeadline(() => !t.broker.stdioSessions!.find(session)!.idle);
    const answer = await nextMessage(stream, (m) => m.id === 7);
    expect(answer.error).toMatchObject({ code: -32001, message: expect.stringContaining("within 60 s (MCP_STDIO_REQUEST_TIMEOUT_SECONDS)") });

    // The server heard of it, for the request it was working on.
    const cancelled = await nextMessage(sseMessages(await call(mcp, auth, session, 8, "cancellations")), (m) => m.id === 8);
    expect(cancellationsOf(cancelled)).toEqual(["no answer within 60 s"]);
  });

  it("does the same for a request without a session (MCP 2026-07-28)", async () => {
    const auth = await bearerFor(t.url, "pia");
    await answerOf(await modernRequest(mcp, auth, 1, "tools/list"), 1);
    const child = t.broker.stdioSessions!.statelessChildren().find((c) => c.owner.key === "demo:pia")!;
    const hang = modernRequest(mcp, auth, 3, "tools/call", { name: "hang", arguments: {} });
    await pastTheDeadline(() => !child.idle);
    const answer = await answerOf(await hang, 3);
    expect(answer.error).toMatchObject({ code: -32001, message: expect.stringContaining("within 60 s (MCP_STDIO_REQUEST_TIMEOUT_SECONDS)") });
    expect(cancellationsOf(await answerOf(await modernRequest(mcp, auth, 4, "tools/call", { name: "cancellations", arguments: {} }), 4))).toEqual([
      "no answer within 60 s",
    ]);
  });

  it("cancels a request without a session in the server when its client closes the stream", async () => {
    const auth = await bearerFor(t.url, "quinn");
    // The grant's warm child, started by a first request.
    await answerOf(await modernRequest(mcp, auth, 1, "tools/list"), 1);
    const child = t.broker.stdioSessions!.statelessChildren().find((c) => c.owner.key === "demo:quinn")!;
    const abort = new AbortController();
    const hang = modernRequest(mcp, auth, 2, "tools/call", { name: "hang", arguments: {} }, { signal: abort.signal }).catch(() => undefined);
    await until(() => !child.idle, "the call to reach the child");
    abort.abort();
    await hang;
    await until(() => child.idle, "the request to be cancelled");
    expect(cancellationsOf(await answerOf(await modernRequest(mcp, auth, 3, "tools/call", { name: "cancellations", arguments: {} }), 3))).toEqual([
      "the client closed the request's stream",
    ]);
  });
});

describe("a client that reads slower than the stdio server writes", () => {
  let t: TestBroker;
  let dir: string;
  let mcp: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-stdio-slow-"));
    t = await startBroker(fixtureEnv());
    mcp = `${t.url}/mcp`;
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const FLOOD = { count: 512, size: 64 * 1024 };

  /**
   * The flood of `res` (request `id`, writing its report to `report`): while the client reads
   * nothing, either the broker stops reading the server, or it reads everything the server writes
   * (and holds it) until the flood is over; it must be the first. Once the client reads, every
   * progress notification arrives, in order and with the client's `progressToken`, then the answer.
   */
  async function expectThrottledThenDelivered(res: Response, child: { readonly paused: boolean }, report: string, id: number, progressToken: string) {
    const done = () => existsSync(report) && readFileSync(report, "utf8").includes("done");
    await until(() => child.paused || done(), "the broker to pause the server or the flood to end", 20_000);
    expect(done()).toBe(false);
    expect(child.paused).toBe(true);

    const stream = sseMessages(res);
    let progress = 0;
    for (;;) {
      const message = await nextMessage(stream);
      if (message.method !== "notifications/progress") {
        expect(message).toMatchObject({ id, result: { content: [{ text: `sent ${FLOOD.count}` }] } });
        break;
      }
      expect((message.params as { progress: number; progressToken: string }).progressToken).toBe(progressToken);
      expect((message.params as { progress: number }).progress).toBe(++progress);
    }
    expect(progress).toBe(FLOOD.count);
    return { done };
  }

  it("stops reading a flooding server while its client does not read, and delivers everything once it does", async () => {
    const auth = await bearerFor(t.url, "omar");
    const session = await openSession(mcp, auth);
    const report = path.join(dir, "flood-report");
    // 32 MiB: several times what the sockets between the broker and the client can hold.
    const res = await call(mcp, auth, session, 1, "flood", { ...FLOOD, report }, { progressToken: "p" });
    expect(res.status).toBe(200);
    const child = t.broker.stdioSessions!.find(session)!.child;

    const { done } = await expectThrottledThenDelivered(res, child, report, 1, "p");
    // The server finished.
    expect(done()).toBe(true);
  }, 60_000);

  it("does the same for a request without a session (MCP 2026-07-28)", async () => {
    const auth = await bearerFor(t.url, "rosa");
    const report = path.join(dir, "stateless-flood-report");
    const res = await modernRequest(mcp, auth, 9, "tools/call", { name: "flood", arguments: { ...FLOOD, report } }, { meta: { progressToken: "f" } });
    expect(res.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const child = t.broker.stdioSessions!.statelessChildren().find((c) => c.owner.key === "demo:rosa")!.child;

    await expectThrottledThenDelivered(res, child, report, 9, "f");
  }, 60_000);
});
