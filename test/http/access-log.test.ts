// An info access line per /mcp request — method, JSON-RPC method(s), status,
// duration, subject, client id, a hash of the MCP session id, bytes — and never a token or the
// session id itself. With LOG_FORMAT=json the start-up banner is one log line too.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createHash } from "node:crypto";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { runToEnd, startServer, waitForOutput } from "../support/spawn.ts";
import { mcpPost } from "../support/mcp-probe.ts";
import { preparedDatabaseUrl } from "../support/broker-process.ts";
import { until } from "../support/wait.ts";

interface LogLine {
  readonly msg: string;
  readonly level: number;
  readonly [field: string]: unknown;
}

describe("the /mcp access line", () => {
  let t: TestBroker;
  let output = "";
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        output += chunk.toString();
        done();
      },
    });
    t = await startBroker({ LOG_LEVEL: "info" }, { logDestination: sink });
  });
  afterAll(async () => t.stop());

  const post = (token: string, body: unknown, session?: string) => mcpPost(t.url, token, body, session);
  /** Opens an MCP session; its id. */
  const initialize = async (token: string): Promise<string> => {
    const opened = await post(token, {
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    });
    await opened.text();
    return opened.headers.get("mcp-session-id")!;
  };

  it("says who called what, how it went and how big it was, at info", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "ann" });
    const session = await initialize(tokens.access_token);
    const called = await post(
      tokens.access_token,
      { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "echo", arguments: { text: "hi" } } },
      session,
    );
    await called.text();
    expect((await post("mab_at_not-a-token", { jsonrpc: "2.0", id: 3, method: "tools/list" })).status).toBe(401);

    const lines = output
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as LogLine)
      .filter((l) => l.msg === "mcp");
    const tag = createHash("sha256").update(session).digest("hex").slice(0, 12);
    expect(lines).toEqual([
      expect.objectContaining({
        level: 30,
        method: "POST",
        url: "/mcp",
        // The catalogue server's name (the environment's one server is "mcp").
        server: "mcp",
        rpc: "initialize",
        status: 200,
        subject: "demo:ann",
        clientId: client.client_id,
        session: tag,
      }),
      expect.objectContaining({ level: 30, method: "POST", rpc: "tools/call", status: 200, subject: "demo:ann", clientId: client.client_id, session: tag }),
      // Refused before anything was read: no caller, no body scanned.
      expect.objectContaining({ level: 30, method: "POST", status: 401 }),
    ]);
    for (const line of lines.slice(0, 2)) {
      expect(line.ms).toEqual(expect.any(Number));
      expect(line.bytesIn).toBeGreaterThan(50);
      expect(line.bytesOut).toBeGreaterThan(50);
    }
    for (const secret of [tokens.access_token, tokens.refresh_token, session]) expect(output).not.toContain(secret);
  });

  it("writes an event stream's line when the stream ends, not when its headers went out", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "bea" });
    const session = await initialize(tokens.access_token);
    const streamLines = () =>
      output
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as LogLine)
        .filter((l) => l.msg === "mcp" && l.method === "GET" && l.subject === "demo:bea");
    const closing = new AbortController();
    const stream = await fetch(`${t.url}/mcp`, {
      headers: { authorization: `Bearer ${tokens.access_token}`, accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
      signal: closing.signal,
    });
    expect(stream.status).toBe(200);
    const headersAt = performance.now();
    // The broker relays the stream after its middleware returned (bench row (s)); a call on the same
    // session still goes through, and the stream has no line while it stays open.
    const called = await post(tokens.access_token, { jsonrpc: "2.0", id: 2, method: "tools/list" }, session);
    await called.text();
    expect(called.status).toBe(200);
    expect(streamLines()).toEqual([]);
    closing.abort();
    const closedAt = performance.now();
    await until(() => streamLines().length === 1, "the stream's access line");
    expect(streamLines()[0]).toMatchObject({ level: 30, url: "/mcp", status: 200, session: createHash("sha256").update(session).digest("hex").slice(0, 12) });
    expect(streamLines()[0]!.ms).toBeGreaterThanOrEqual(Math.floor(closedAt - headersAt));
  });
});

describe("LOG_FORMAT=json", () => {
  it("writes the start-up banner as one log line with its facts", async () => {
    const cwd = mkdtempSync(path.join(tmpdir(), "mab-json-"));
    const child = startServer({ cwd, env: { PORT: "0", LOG_FORMAT: "json", DATABASE_URL: await preparedDatabaseUrl(cwd) } });
    const finished = runToEnd(child, 30_000);
    const seen = await waitForOutput(child, /"msg":"mcp-auth-broker is running/).catch((err: unknown) => {
      child.kill("SIGKILL");
      throw err;
    });
    child.kill("SIGTERM");
    expect((await finished).code).toBe(0);
    const banner = seen
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as LogLine)
      .find((l) => l.msg.startsWith("mcp-auth-broker is running"));
    expect(banner).toMatchObject({ level: 30, demoMode: true, mcpEndpoint: expect.stringMatching(/\/mcp$/), health: expect.stringMatching(/\/healthz$/) });
    // Nothing but JSON lines: a log collector reads all of it.
    expect(seen.split("\n").filter((l) => l && !l.startsWith("{"))).toEqual([]);
  });
});
