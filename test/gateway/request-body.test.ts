// The body the proxy forwards, read from real requests on a real socket: a body that came whole
// with its headers is taken from the request's buffer at once, one still arriving is read as it
// comes, one over the limit is streamed; in every case the request ends, so the keep-alive
// connection carries the next request.
import { afterEach, describe, expect, it } from "@jest/globals";
import { createServer, type IncomingMessage, type Server } from "node:http";
import net from "node:net";
import { once } from "node:events";
import { isStreamed, SMALL_BODY_BYTES, upstreamBody, type UpstreamBody } from "../../src/gateway/request-body.ts";
import { ExchangeAbort } from "../../src/gateway/exchange-abort.ts";

interface Seen {
  readonly body: UpstreamBody;
  readonly dataListeners: number;
  readonly ended: boolean;
}

let server: Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

/**
 * A server that waits one event-loop turn (the parser has buffered what came in the packet), reads
 * the body with upstreamBody, and tells the test what it got and whether the request then ended.
 */
async function bodyServer(): Promise<{ port: number; seen: Seen[]; reading: Promise<void> }> {
  const seen: Seen[] = [];
  let startedReading = () => {};
  const reading = new Promise<void>((resolve) => {
    startedReading = resolve;
  });
  server = createServer(async (req: IncomingMessage, res) => {
    await new Promise((resolve) => setImmediate(resolve));
    const pending = upstreamBody(req, new ExchangeAbort());
    startedReading();
    let body = await pending;
    const dataListeners = req.listenerCount("data");
    if (isStreamed(body)) {
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(chunk);
      body = Buffer.concat(chunks);
    }
    if (!req.readableEnded) await once(req, "end");
    seen.push({ body, dataListeners, ended: req.readableEnded });
    res.end("ok");
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { port: (server.address() as net.AddressInfo).port, seen, reading };
}

const head = (length: number) => `POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

/** Reads off the socket until the next answer has come whole. */
async function answer(socket: net.Socket): Promise<void> {
  let text = "";
  while (!text.startsWith("HTTP/1.1 200") || !text.endsWith("ok")) {
    const [chunk] = (await once(socket, "data")) as [Buffer];
    text += chunk.toString();
  }
}

describe("the body forwarded to the MCP server", () => {
  it("takes a body that came whole with its headers from the buffer, and the keep-alive connection carries the next request", async () => {
    const { port, seen } = await bodyServer();
    const socket = net.connect(port, "127.0.0.1");
    await once(socket, "connect");
    const first = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: { message: "é" } } });
    socket.write(head(Buffer.byteLength(first)) + first);
    await answer(socket);
    const second = JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" });
    socket.write(head(Buffer.byteLength(second)) + second);
    await answer(socket);
    socket.destroy();
    expect(seen.map((s) => (s.body as Buffer).toString())).toEqual([first, second]);
    // No listener is left waiting for data, and each request ended (else the next would not be read).
    expect(seen.map((s) => [s.dataListeners, s.ended])).toEqual([
      [0, true],
      [0, true],
    ]);
  });

  it("reads a body still arriving as it comes", async () => {
    const { port, seen, reading } = await bodyServer();
    const socket = net.connect(port, "127.0.0.1");
    await once(socket, "connect");
    const body = JSON.stringify({ jsonrpc: "2.0", id: 3, method: "ping" });
    socket.write(head(Buffer.byteLength(body)) + body.slice(0, 10));
    // The server has started reading with part of the body in hand; the rest comes after.
    await reading;
    socket.write(body.slice(10));
    await answer(socket);
    socket.destroy();
    expect((seen[0]!.body as Buffer).toString()).toBe(body);
    // Read as it came: by events, which are removed once the body has ended.
    expect(seen[0]!.ended).toBe(true);
  });

  it("takes an empty body with Content-Length: 0", async () => {
    const { port, seen } = await bodyServer();
    const socket = net.connect(port, "127.0.0.1");
    await once(socket, "connect");
    socket.write(head(0));
    await answer(socket);
    socket.destroy();
    expect(Buffer.isBuffer(seen[0]!.body) && (seen[0]!.body as Buffer).length).toBe(0);
    expect(seen[0]!.ended).toBe(true);
  });

  it("streams a body larger than the small-body limit, even when all of it has arrived", async () => {
    const { port, seen } = await bodyServer();
    const socket = net.connect(port, "127.0.0.1");
    await once(socket, "connect");
    const large = `"${"x".repeat(SMALL_BODY_BYTES + 10)}"`;
    socket.write(head(large.length) + large);
    await answer(socket);
    socket.destroy();
    expect((seen[0]!.body as Buffer).toString()).toBe(large);
  });
});
