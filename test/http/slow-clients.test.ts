// Slow clients must not hold the broker's resources: a trickled /mcp upload is answered 408 before
// the MCP server is ever contacted (or, once streaming, cut by the minimum upload rate), and one
// address may have only so many bodies in flight at once, the excess refused with 429 at once. All
// over raw sockets, byte timing controlled by the test.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { clientKey, receivingCount, setSlowClientLimits, DEFAULT_SLOW_CLIENT_LIMITS } from "../../src/http/slow-requests.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { freshIp } from "../support/oauth-client.ts";
import { head, rawRequest, type RawExchange } from "./raw-http.ts";
import { until, within } from "../support/wait.ts";

const BODY_DEADLINE_MS = 400;
const RATE_WINDOW_MS = 300;

/** A stand-in MCP server that counts what reaches it (the broker tells it the client's address). */
const mcp = { connections: 0, requests: [] as Array<{ ip: string; bytes: number; closedEarly: boolean }> };
let mcpServer: http.Server;
let t: TestBroker;
let token: string;
let host: string;

beforeAll(async () => {
  mcpServer = http.createServer((req, res) => {
    const record = { ip: String(req.headers["x-forwarded-for"] ?? ""), bytes: 0, closedEarly: false };
    mcp.requests.push(record);
    res.on("close", () => {
      if (!res.writableFinished) record.closedEarly = true;
    });
    req.on("data", (c: Buffer) => (record.bytes += c.length));
    if (req.url === "/mcp/mirror") {
      // Streams the upload back as it arrives.
      res.writeHead(200, { "content-type": "application/octet-stream", "x-got-transfer-encoding": String(req.headers["transfer-encoding"] ?? "none") });
      res.flushHeaders();
      req.pipe(res);
      return;
    }
    req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","result":{},"id":1}'));
  });
  mcpServer.on("connection", () => mcp.connections++);
  await new Promise<void>((resolve) => mcpServer.listen(0, "127.0.0.1", resolve));
  t = await startBroker({ TRUST_PROXY: "true", MCP_SERVER_URL: `http://127.0.0.1:${(mcpServer.address() as AddressInfo).port}/mcp` });
  host = new URL(t.url).host;
  token = (await obtainTokens(t.url, { user: "slow-uploader" })).tokens.access_token;
});

afterAll(async () => {
  await t.stop();
  mcpServer.closeAllConnections();
  await new Promise((resolve) => mcpServer.close(resolve));
});

/** The head of an authenticated POST to `path` under /mcp, from `ip`, with `framing` (and overrides). */
function mcpHead(ip: string, framing: Record<string, string>, path = "/mcp"): string {
  return head("POST", path, {
    host,
    authorization: `Bearer ${token}`,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "x-forwarded-for": ip,
    ...framing,
  });
}

/** A chunked upload to the test MCP server's echo endpoint. */
const mirrorHead = (ip: string) => mcpHead(ip, { "content-type": "application/octet-stream", "transfer-encoding": "chunked" }, "/mcp/mirror");

const jsonRpcError = (res: { body: string }) => JSON.parse(res.body) as { jsonrpc: string; error: { code: number; message: string }; id: null };

describe("slow uploads to /mcp", () => {
  beforeAll(() => {
    setSlowClientLimits(t.broker.app, { bodyDeadlineMs: BODY_DEADLINE_MS, rateWindowMs: RATE_WINDOW_MS, minUploadBytesPerSecond: 1024 });
  });

  it("forwards a normal upload (the counting MCP server sees it)", async () => {
    const ip = freshIp();
    const res = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream", "x-forwarded-for": ip },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    expect(res.status).toBe(200);
    expect(mcp.requests.filter((r) => r.ip === ip)).toHaveLength(1);
  });

  it.each([
    ["with a small Content-Length", { "content-length": "500" }, "{", "a"],
    ["chunked", { "transfer-encoding": "chunked" }, "1\r\n{\r\n", "1\r\na\r\n"],
  ])("answers a trickled upload (%s) with 408 within the body deadline; the MCP server never hears of it", async (_what, framing, first, byte) => {
    const ip = freshIp();
    const connectionsBefore = mcp.connections;
    const started = Date.now();
    const ex = rawRequest(t.url, mcpHead(ip, framing), first);
    ex.trickle(50, byte);
    const res = await within(ex.response, BODY_DEADLINE_MS + 3000, "the 408 response");
    const elapsed = Date.now() - started;
    expect(res.status).toBe(408);
    expect(res.headers.connection).toBe("close");
    expect(jsonRpcError(res)).toEqual({ jsonrpc: "2.0", error: { code: -32000, message: expect.stringMatching(/upload/) }, id: null });
    // Not before the body deadline; that it came from the deadline is what the 408 says.
    expect(elapsed).toBeGreaterThanOrEqual(BODY_DEADLINE_MS - 20);
    await within(ex.closed, 3000, "the broker to drop the connection");
    expect(mcp.requests.filter((r) => r.ip === ip)).toEqual([]);
    expect(mcp.connections).toBe(connectionsBefore);
  });

  it("cuts a large upload that falls under the minimum rate once it streams, with 408", async () => {
    const ip = freshIp();
    // 1 MiB announced; the first 80 KiB at once (past the read-whole limit, so it is streamed), then a trickle.
    const ex = rawRequest(t.url, mcpHead(ip, { "content-length": String(1024 * 1024) }), Buffer.alloc(80 * 1024, "a"));
    ex.trickle(50, "a");
    const res = await within(ex.response, BODY_DEADLINE_MS + 3 * RATE_WINDOW_MS + 3000, "the 408 response");
    expect(res.status).toBe(408);
    expect(res.headers.connection).toBe("close");
    expect(jsonRpcError(res).error.message).toMatch(/upload/);
    await within(ex.closed, 3000, "the broker to drop the connection");
    // It was streamed to the MCP server, and that request is cut too.
    await until(() => mcp.requests.some((r) => r.ip === ip && r.closedEarly), "the upstream request to be cut");
  });

  it("does not cut a large upload that keeps above the minimum rate", async () => {
    const ip = freshIp();
    const total = 200 * 1024;
    // The head (past the read-whole limit) at once, so that the body deadline is met however busy
    // the machine is; then 8 KiB every 40 ms (~200 KiB/s) for about a second: several rate windows.
    const head = 72 * 1024;
    const ex = rawRequest(t.url, mcpHead(ip, { "content-length": String(total) }), Buffer.alloc(head, "b"));
    let sent = head;
    const timer = setInterval(() => {
      const n = Math.min(8 * 1024, total - sent);
      ex.write(Buffer.alloc(n, "b"));
      sent += n;
      if (sent === total) clearInterval(timer);
    }, 40);
    const res = await within(ex.response, 10_000, "the response");
    clearInterval(timer);
    expect(res.status).toBe(200);
    expect(mcp.requests.find((r) => r.ip === ip)?.bytes).toBe(total);
    ex.destroy();
  });

  it("streams a large upload: the MCP server reads its head while the rest is still to come", async () => {
    const ip = freshIp();
    const ex = rawRequest(t.url, mirrorHead(ip));
    const first = 80 * 1024;
    ex.write(`${first.toString(16)}\r\n`);
    ex.write(Buffer.alloc(first, "h"));
    ex.write("\r\n");
    let echoed = 0;
    const headEchoed = new Promise<void>((resolve) =>
      ex.socket.on("data", (d: Buffer) => {
        echoed += d.length;
        if (echoed > first) resolve();
      }),
    );
    await within(headEchoed, 5000, "the head of the upload echoed while the upload is open");
    expect(mcp.requests.find((r) => r.ip === ip)?.bytes).toBe(first);
    ex.write("4\r\ntail\r\n0\r\n\r\n");
    const res = await within(ex.response, 5000, "the end of the echo");
    expect(res.status).toBe(200);
    expect(res.body).toBe(`${"h".repeat(first)}tail`);
    ex.destroy();
  });

  it("sends a small body of unknown length up whole, once it has arrived", async () => {
    const ip = freshIp();
    const ex = rawRequest(t.url, mirrorHead(ip), "6\r\nfirst;\r\n");
    ex.write("6\r\nsecond\r\n0\r\n\r\n");
    const res = await within(ex.response, 5000, "the echo");
    expect(res.status).toBe(200);
    expect(res.headers["x-got-transfer-encoding"]).toBe("none");
    expect(res.body).toBe("first;second");
    ex.destroy();
  });
});

describe("bodies in flight per client address", () => {
  const open: RawExchange[] = [];
  afterAll(() => {
    for (const ex of open) ex.destroy();
  });

  it("refuses the excess from one address at once with 429, while another address gets through", async () => {
    // Long deadlines: the slow senders stay in flight for the whole test.
    setSlowClientLimits(t.broker.app, { bodyDeadlineMs: 20_000, rateWindowMs: 20_000, maxReceivingPerIp: 32 });
    const a = freshIp();
    const b = freshIp();
    const cap = 32;
    for (let i = 0; i < cap; i++) {
      const path = i % 2 === 0 ? "/token" : "/register";
      const type = i % 2 === 0 ? "application/x-www-form-urlencoded" : "application/json";
      open.push(rawRequest(t.url, head("POST", path, { host, "content-type": type, "content-length": "100", "x-forwarded-for": a }), "g"));
    }
    await until(() => receivingCount(t.broker.app, a) === cap, `${cap} bodies from one address in flight`);

    const excess = rawRequest(
      t.url,
      head("POST", "/token", { host, "content-type": "application/x-www-form-urlencoded", "content-length": "100", "x-forwarded-for": a }),
      "g",
    );
    open.push(excess);
    // Answered while its body is still missing: refused on admission, not by a body deadline
    // (which would say 408).
    const res = await within(excess.response, 3000, "the 429");
    expect(res.status).toBe(429);
    expect(Number(res.headers["retry-after"])).toBeGreaterThan(0);
    expect(res.headers.connection).toBe("close");
    expect(JSON.parse(res.body)).toEqual({ error: "invalid_request", error_description: expect.stringMatching(/too many/i) });

    // /mcp counts against the same address, and answers in JSON-RPC.
    const connectionsBefore = mcp.connections;
    const excessMcp = rawRequest(t.url, mcpHead(a, { "content-length": "100" }), "{");
    open.push(excessMcp);
    const mcpRes = await within(excessMcp.response, 3000, "the /mcp 429");
    expect(mcpRes.status).toBe(429);
    expect(Number(mcpRes.headers["retry-after"])).toBeGreaterThan(0);
    expect(jsonRpcError(mcpRes)).toEqual({ jsonrpc: "2.0", error: { code: -32000, message: expect.stringMatching(/too many/i) }, id: null });
    expect(mcp.connections).toBe(connectionsBefore);

    // Another address: its slow body is admitted and answered once complete.
    const other = rawRequest(
      t.url,
      head("POST", "/token", { host, "content-type": "application/x-www-form-urlencoded", "content-length": "19", "x-forwarded-for": b }),
      "grant_type",
    );
    open.push(other);
    await until(() => receivingCount(t.broker.app, b) === 1, "the other address's body in flight");
    other.write("=nonsense");
    const otherRes = await within(other.response, 3000, "the other address's answer");
    expect(otherRes.status).not.toBe(429);
    expect(otherRes.status).toBeLessThan(500);

    // Clients that go away free their places.
    for (const ex of open.splice(0)) ex.destroy();
    await until(() => receivingCount(t.broker.app, a) === 0, "the places to be freed");
    setSlowClientLimits(t.broker.app, DEFAULT_SLOW_CLIENT_LIMITS);
  });
});

describe("the address a limit counts against", () => {
  it.each([
    ["203.0.113.9", "203.0.113.9"],
    ["::ffff:203.0.113.9", "203.0.113.9"],
    ["2001:db8:1:2:3:4:5:6", "2001:db8:1:2::/64"],
    ["2001:0db8:0001:0002:ffff::1", "2001:db8:1:2::/64"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["::1", "0:0:0:0::/64"],
  ])("%s counts as %s (one IPv6 subscriber is a /64)", (ip, key) => {
    expect(clientKey(ip)).toBe(key);
  });
});
