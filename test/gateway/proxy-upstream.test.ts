// The proxy against a hand-written upstream that misbehaves on purpose: unreachable, silent,
// slow, cookie-setting, and one that answers before the upload has finished.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { freePort } from "../support/start-broker.ts";
import { sseEvents, startGateway, type TestGateway } from "./harness.ts";
import { until, within } from "../support/wait.ts";

const TIMEOUT_MS = 300;

interface Seen {
  readonly url: string;
  readonly headers: http.IncomingHttpHeaders;
  closedEarly: boolean;
}

let upstream: http.Server;
let upstreamUrl: string;
const seen: Seen[] = [];
let gateway: TestGateway;
let releaseHeld: (() => void) | undefined;

function route(req: http.IncomingMessage, res: http.ServerResponse): void {
  const path = new URL(req.url ?? "/", "http://x").pathname;
  switch (path) {
    case "/mcp/hang":
      return; // never answers
    case "/mcp/headers":
      res.writeHead(200, {
        "content-type": "text/plain",
        "set-cookie": ["mcp=1; Path=/", "other=2"],
        connection: "keep-alive, x-hop",
        "x-hop": "only for this connection",
        "keep-alive": "timeout=5",
        "x-kept": "yes",
        "mcp-session-id": "sid-headers",
      });
      res.end("ok");
      return;
    case "/mcp/slow-sse":
      // Headers at once, the only event well after the proxy's timeout: the body never times out.
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      setTimeout(() => res.end(`event: message\ndata: {"late":true}\n\n`), TIMEOUT_MS * 2);
      return;
    case "/mcp/held":
      // A long tool call: the event stream's headers at once, its only event when the test says.
      res.writeHead(200, { "content-type": "text/event-stream", "x-held": "yes" });
      res.flushHeaders();
      releaseHeld = () => res.end(`event: message\ndata: {"released":true}\n\n`);
      return;
    case "/mcp/mirror": {
      // Streams the upload back as it arrives, answering before the upload has ended.
      res.writeHead(200, {
        "content-type": "application/octet-stream",
        "x-got-content-length": String(req.headers["content-length"] ?? "none"),
        "x-got-transfer-encoding": String(req.headers["transfer-encoding"] ?? "none"),
      });
      res.flushHeaders();
      req.pipe(res);
      return;
    }
    case "/mcp/after-upload": {
      // Answers only once the whole upload has arrived, with what arrived.
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => res.writeHead(200, { "content-type": "text/plain" }).end(Buffer.concat(chunks)));
      return;
    }
    default:
      res.writeHead(404).end();
  }
}

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const record: Seen = { url: req.url ?? "", headers: req.headers, closedEarly: false };
    seen.push(record);
    res.on("close", () => {
      if (!res.writableFinished) record.closedEarly = true;
    });
    route(req, res);
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`;
  gateway = await startGateway({ targetUrl: upstreamUrl, timeoutMs: TIMEOUT_MS });
});

afterAll(async () => {
  await gateway.close();
  upstream.closeAllConnections();
  await new Promise((resolve) => upstream.close(resolve));
});

const jsonRpcError = (message: string) => ({ jsonrpc: "2.0", error: { code: -32603, message }, id: null });

describe("MCP proxy failures", () => {
  it("answers 502 with a JSON-RPC error when the MCP server is unreachable", async () => {
    const unreachable = await startGateway({ targetUrl: `http://127.0.0.1:${await freePort()}/mcp` });
    try {
      const res = await fetch(unreachable.url, { method: "POST", headers: { "x-test-user": "u", "content-type": "application/json" }, body: "{}" });
      expect(res.status).toBe(502);
      expect(res.headers.get("content-type")).toContain("application/json");
      expect(await res.json()).toEqual(jsonRpcError("The MCP server is unreachable."));
    } finally {
      await unreachable.close();
    }
  });

  it("answers 504 when the MCP server sends no response headers in time", async () => {
    const started = Date.now();
    const res = await fetch(`${gateway.url}/hang`, { headers: { "x-test-user": "u", "user-agent": "hang-1" } });
    expect(res.status).toBe(504);
    expect(await res.json()).toEqual(jsonRpcError(`The MCP server did not respond within ${TIMEOUT_MS} ms.`));
    expect(Date.now() - started).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
    // The abandoned upstream request is cut, not left hanging.
    await until(() => seen.some((s) => s.headers["user-agent"] === "hang-1" && s.closedEarly), "the upstream request to be cut");
  });

  it("applies the timeout to the response headers only, never to a streaming body", async () => {
    const res = await fetch(`${gateway.url}/slow-sse`, { headers: { "x-test-user": "u", accept: "text/event-stream" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const events = sseEvents(res.body);
    expect((await events.next()).value).toEqual({ event: "message", data: '{"late":true}' });
  });

  it("relays response headers the MCP server sent while it still holds the body", async () => {
    // The client learns the call is under way (and its own header timeout stops) as it would from
    // the MCP server directly, though the proxy sends headers and a body already there in one write.
    const res = await within(
      fetch(`${gateway.url}/held`, { method: "POST", headers: { "x-test-user": "u", accept: "text/event-stream" }, body: "{}" }),
      5000,
      "the response headers while the body is held",
    );
    expect(res.status).toBe(200);
    expect(res.headers.get("x-held")).toBe("yes");
    expect(releaseHeld).toBeDefined();
    releaseHeld!();
    const events = sseEvents(res.body);
    expect((await events.next()).value).toEqual({ event: "message", data: '{"released":true}' });
  });

  it("cuts the upstream request when the client leaves while waiting for headers", async () => {
    const controller = new AbortController();
    const pending = fetch(`${gateway.url}/hang`, { headers: { "x-test-user": "u", "user-agent": "hang-2" }, signal: controller.signal });
    await until(() => seen.some((s) => s.headers["user-agent"] === "hang-2"), "the request to reach the upstream");
    controller.abort();
    await expect(pending).rejects.toThrow();
    await until(() => seen.some((s) => s.headers["user-agent"] === "hang-2" && s.closedEarly), "the upstream request to be cut");
  });
});

describe("MCP proxy headers and bodies", () => {
  it("drops Set-Cookie and hop-by-hop response headers, keeps the rest", async () => {
    const res = await fetch(`${gateway.url}/headers`, { headers: { "x-test-user": "u" } });
    expect(res.status).toBe(200);
    expect(res.headers.get("set-cookie")).toBeNull();
    expect(res.headers.get("x-hop")).toBeNull();
    expect(res.headers.get("keep-alive")).not.toBe("timeout=5"); // the broker's own connection has its own
    expect(res.headers.get("x-kept")).toBe("yes");
    expect(res.headers.get("mcp-session-id")).toBe("sid-headers");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff"); // the broker's own headers stay
    expect(await res.text()).toBe("ok");
    // A 2xx carrying a new session id binds it to the caller.
    expect(await gateway.binding.ownerOf("sid-headers")).toBe("test:u");
  });

  it("streams the request body past the first 64 KiB: the MCP server reads it while the upload is still open", async () => {
    // The first 64 KiB are read whole before the MCP server is contacted (a trickle never takes an
    // upstream connection); what follows streams.
    const first = "a".repeat(70_000);
    let push!: (chunk: string | null) => void;
    const upload = new ReadableStream<Uint8Array>({
      start(controller) {
        push = (chunk) => (chunk === null ? controller.close() : controller.enqueue(new TextEncoder().encode(chunk)));
      },
    });
    push(first);
    const res = await within(
      fetch(`${gateway.url}/mirror`, {
        method: "POST",
        headers: { "x-test-user": "u", "content-type": "application/octet-stream" },
        body: upload,
        duplex: "half",
      } as RequestInit),
      5000,
      "the response to the still-open upload",
    );
    expect(res.headers.get("x-got-transfer-encoding")).toBe("chunked");
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let echoed = "";
    while (echoed.length < first.length) echoed += decoder.decode((await within(reader.read(), 5000, "the first part echoed")).value);
    expect(echoed).toBe(first);
    push("second");
    push(null);
    let rest = "";
    for (let r = await reader.read(); !r.done; r = await reader.read()) rest += decoder.decode(r.value);
    expect(rest).toBe("second");
  });

  it("forwards Content-Length when the client sends one", async () => {
    const res = await fetch(`${gateway.url}/mirror`, { method: "POST", headers: { "x-test-user": "u" }, body: "0123456789" });
    expect(res.headers.get("x-got-content-length")).toBe("10");
    expect(await res.text()).toBe("0123456789");
  });

  /** POSTs `chunks` to `path`, one every `everyMs`, with or without a Content-Length. */
  function trickle(path: string, chunks: string[], everyMs: number, withLength: boolean): Promise<{ status: number; body: string }> {
    const url = new URL(`${gateway.url}${path}`);
    return new Promise((resolve, reject) => {
      const req = http.request(
        url,
        { method: "POST", headers: { "x-test-user": "u", ...(withLength ? { "content-length": String(chunks.join("").length) } : {}) } },
        (res) => {
          let body = "";
          res.on("data", (d: Buffer) => (body += d.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
      let i = 0;
      const next = () => {
        if (i === chunks.length) return void req.end();
        req.write(chunks[i++]);
        setTimeout(next, everyMs);
      };
      next();
    });
  }

  it.each([
    ["a small body with Content-Length (read whole, then sent)", true],
    ["a chunked body (streamed)", false],
  ])("keeps a slow upload that is still progressing alive past the timeout: %s", async (_what, withLength) => {
    const chunks = ["a", "b", "c", "d", "e", "f"];
    // 6 chunks, TIMEOUT_MS / 3 apart: the upload takes well over the timeout, but never stalls.
    const res = await trickle("/after-upload", chunks, TIMEOUT_MS / 3, withLength);
    expect(res).toEqual({ status: 200, body: "abcdef" });
  });

  it.each([
    ["with Content-Length", true],
    ["chunked", false],
  ])("answers 504 when an upload stalls and no answer comes (%s)", async (_what, withLength) => {
    const url = new URL(`${gateway.url}/after-upload`);
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request(url, { method: "POST", headers: { "x-test-user": "u", ...(withLength ? { "content-length": "10" } : {}) } }, (r) => {
        let body = "";
        r.on("data", (d: Buffer) => (body += d.toString()));
        r.on("end", () => resolve({ status: r.statusCode ?? 0, body }));
      });
      req.on("error", reject);
      req.write("12345"); // and nothing more
    });
    expect(res.status).toBe(504);
    // The answer names the deadline: it was the broker's timer, not the MCP server, that ended it.
    expect(JSON.parse(res.body)).toEqual(jsonRpcError(`The MCP server did not respond within ${TIMEOUT_MS} ms.`));
  });

  it("refuses paths that would climb out of the MCP server's path", async () => {
    const port = new URL(gateway.url).port;
    for (const path of ["/mcp/../admin", "/mcp/%2e%2e/admin", "/mcp/a/%2E./b", "/mcp/a\\..\\b"]) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.request({ host: "127.0.0.1", port, path, headers: { "x-test-user": "u" } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on("error", reject);
        req.end();
      });
      expect([path, status]).toEqual([path, 400]);
    }
    expect(seen.some((s) => s.url.includes("admin") || s.url.includes(".."))).toBe(false);
  });
});
