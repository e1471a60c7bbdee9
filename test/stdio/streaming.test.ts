// The bridge's Streamable HTTP semantics over raw HTTP, where the order of events on each stream
// can be read exactly: progress before the result on the request's own stream; the child's own
// requests (sampling) and log messages on the GET stream, or on the request's stream when no GET
// stream is open; the client's answer reaching the child; ids mapped; batches where the protocol
// version has them; DELETE ending the child.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { alive, bearerFor, fixtureEnv, MCP_HEADERS, nextMessage, openSession, sseMessages } from "./stdio-support.ts";
import { until } from "../support/wait.ts";

describe("streaming through the stdio bridge", () => {
  let t: TestBroker;
  let mcp: string;
  let auth: Record<string, string>;
  beforeAll(async () => {
    t = await startBroker(fixtureEnv());
    mcp = `${t.url}/mcp`;
    auth = await bearerFor(t.url, "carol");
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
  });

  const headers = (session: string, version = "2025-06-18") => ({ ...MCP_HEADERS, ...auth, "mcp-session-id": session, "mcp-protocol-version": version });
  const post = (session: string, body: unknown, version?: string) =>
    fetch(mcp, { method: "POST", headers: headers(session, version), body: JSON.stringify(body) });
  const call = (id: string | number, name: string, args: Record<string, unknown> = {}, meta?: Record<string, unknown>) => ({
    jsonrpc: "2.0",
    id,
    method: "tools/call",
    params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) },
  });
  const openGet = async (session: string) => {
    const res = await fetch(mcp, { headers: { ...headers(session), accept: "text/event-stream" } });
    expect(res.status).toBe(200);
    return sseMessages(res);
  };

  it("sends the progress of a request on its own stream, before its result", async () => {
    const session = await openSession(mcp, auth);
    const res = await post(session, call("p-1", "progress", { steps: 3 }, { progressToken: "tok" }));
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const messages = [];
    for await (const m of sseMessages(res)) messages.push(m);
    expect(messages.map((m) => m.method ?? `result ${String(m.id)}`)).toEqual([
      "notifications/progress",
      "notifications/progress",
      "notifications/progress",
      "result p-1",
    ]);
    expect(messages.slice(0, 3).map((m) => (m.params as { progress: number; progressToken: string }).progress)).toEqual([1, 2, 3]);
    expect((messages[0]!.params as { progressToken: string }).progressToken).toBe("tok");
  });

  it("sends a sampling request on the open GET stream and carries the client's answer to the child", async () => {
    const session = await openSession(mcp, auth);
    const get = await openGet(session);
    const pending = post(session, call(1, "sample"));
    const request = await nextMessage(get, (m) => m.method === "sampling/createMessage");
    const answer = await post(session, {
      jsonrpc: "2.0",
      id: request.id,
      result: { role: "assistant", content: { type: "text", text: "hello from the client" }, model: "test" },
    });
    expect(answer.status).toBe(202);
    const result = await nextMessage(sseMessages(await pending), (m) => m.id === 1);
    expect(result.result).toMatchObject({ content: [{ type: "text", text: "hello from the client" }] });
    await get.return(undefined);
  });

  it("without a GET stream, sends the sampling request on the stream of the request waiting for it", async () => {
    const session = await openSession(mcp, auth);
    const stream = sseMessages(await post(session, call(2, "sample")));
    const request = await nextMessage(stream);
    expect(request.method).toBe("sampling/createMessage");
    await post(session, { jsonrpc: "2.0", id: request.id, result: { role: "assistant", content: { type: "text", text: "inline" }, model: "test" } });
    expect((await nextMessage(stream)).result).toMatchObject({ content: [{ type: "text", text: "inline" }] });
  });

  it("sends a log message on the GET stream", async () => {
    const session = await openSession(mcp, auth);
    const get = await openGet(session);
    const res = await post(session, call(3, "log", { message: "written to the log" }));
    const onPost = [];
    for await (const m of sseMessages(res)) onPost.push(m);
    expect(onPost).toEqual([expect.objectContaining({ id: 3 })]);
    const log = await nextMessage(get);
    expect(log).toMatchObject({ method: "notifications/message", params: { level: "info", data: "written to the log" } });
    await get.return(undefined);
  });

  it('keeps requests with equal-looking ids apart (1 and "1") and answers each on its own stream', async () => {
    const session = await openSession(mcp, auth);
    const [a, b] = await Promise.all([post(session, call(1, "echo", { message: "number" })), post(session, call("1", "echo", { message: "string" }))]);
    const [ma, mb] = await Promise.all([nextMessage(sseMessages(a)), nextMessage(sseMessages(b))]);
    expect(ma).toMatchObject({ id: 1, result: { content: [{ text: "number" }] } });
    expect(mb).toMatchObject({ id: "1", result: { content: [{ text: "string" }] } });
  });

  it("answers a batch under 2025-03-26 and refuses one under 2025-06-18", async () => {
    const session = await openSession(mcp, auth, "2025-03-26");
    const res = await post(session, [call(10, "echo", { message: "a" }), call(11, "echo", { message: "b" })], "2025-03-26");
    const ids = [];
    for await (const m of sseMessages(res)) ids.push(m.id);
    expect(ids.sort()).toEqual([10, 11]);
    const refused = await post(session, [call(12, "echo", { message: "a" })], "2025-06-18");
    expect(refused.status).toBe(400);
    expect(await refused.json()).toMatchObject({ error: { code: -32600 } });
  });

  it("refuses a protocol version it does not speak", async () => {
    const session = await openSession(mcp, auth);
    const res = await post(session, call(4, "echo", { message: "x" }), "1999-01-01");
    expect(res.status).toBe(400);
  });

  it("ends the session and its process on DELETE; the session id is then unknown (404)", async () => {
    const session = await openSession(mcp, auth);
    const pid = t.broker.stdioSessions!.find(session)!.child.pid;
    const res = await fetch(mcp, { method: "DELETE", headers: headers(session) });
    expect(res.status).toBe(200);
    await until(() => !alive(pid), "the child to exit");
    const after = await post(session, call(5, "echo", { message: "x" }));
    expect(after.status).toBe(404);
  });

  it("answers 400 to a request without a session that is not an initialize, and 404 to an unknown session", async () => {
    const res = await fetch(mcp, { method: "POST", headers: { ...MCP_HEADERS, ...auth }, body: JSON.stringify(call(6, "echo", { message: "x" })) });
    expect(res.status).toBe(400);
    const unknown = await post("no-such-session", call(7, "echo", { message: "x" }));
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: -32001 } });
  });
});
