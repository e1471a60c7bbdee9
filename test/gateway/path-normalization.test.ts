// Encoded path tricks at the MCP proxy, over real HTTP (attack trial, item 9): the request lines
// are written raw on a socket (Node's http client and fetch would normalise some of them first),
// and an MCP server that records every request it gets shows that none of them reach it, while a
// harmless path does arrive, in canonical form.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type Server } from "node:http";
import { startGateway, type TestGateway } from "./harness.ts";
import { rawRequest } from "./raw-request.ts";

let upstream: Server;
let upstreamUrl: string;
const received: string[] = [];
let gateway: TestGateway;
let port: number;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    received.push(req.url ?? "");
    req.resume();
    res.writeHead(200, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","id":1,"result":{}}');
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const address = upstream.address();
  upstreamUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/api/mcp`;
  gateway = await startGateway({ targetUrl: upstreamUrl });
  port = Number(new URL(gateway.url).port);
});

afterAll(async () => {
  await gateway.close();
  await new Promise((resolve) => upstream.close(resolve));
});

const TRICKS = [
  "/mcp/..%2fadmin",
  "/mcp/..%2Fadmin",
  "/mcp/%2e%2e%2fadmin",
  "/mcp/%2e%2e/admin",
  "/mcp/.%2e/admin",
  "/mcp/%252e%252e/admin",
  "/mcp/..;/admin",
  "/mcp/..;x=1/admin",
  "/mcp/..%3b/admin",
  "/mcp/a%00b",
  "/mcp/..%00/admin",
  "/mcp/a%0d%0aX-Injected:%201",
  "/mcp/..%5cadmin",
  "/mcp/..\\admin",
  "/mcp/%c0%ae%c0%ae/admin",
  "/mcp/a%zz",
  "/mcp/../admin",
  "/mcp/a/..",
];

describe("encoded path tricks at /mcp", () => {
  it.each(TRICKS)("%s is refused with the JSON-RPC 400 and never reaches the MCP server", async (target) => {
    const before = received.length;
    const res = await rawRequest(
      port,
      "POST",
      target,
      { "x-test-user": "alice", "content-type": "application/json", accept: "application/json, text/event-stream" },
      "{}",
    );
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toMatchObject({ jsonrpc: "2.0", error: { code: -32000 }, id: null });
    expect(received.slice(before)).toEqual([]);
  });

  it("a raw NUL or tab in the request line is refused by the HTTP parser and never reaches the MCP server", async () => {
    const before = received.length;
    for (const target of ["/mcp/a\u0000b", "/mcp/a\tb"]) {
      expect((await rawRequest(port, "GET", target, { "x-test-user": "alice" })).status).toBe(400);
    }
    expect(received.slice(before)).toEqual([]);
  });

  it("a harmless path reaches the MCP server normalised and canonically encoded", async () => {
    const before = received.length;
    const res = await rawRequest(port, "POST", "/mcp//sub/a%41%7e%3f%c3%a9{x}?q=1", { "x-test-user": "alice", "content-type": "application/json" }, "{}");
    expect(res.status).toBe(200);
    expect(received.slice(before)).toEqual(["/api/mcp/sub/aA~%3F%C3%A9%7Bx%7D?q=1"]);
  });
});
