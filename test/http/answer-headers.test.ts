// The headers every answer carries (http/answer-headers.ts): kept aside on the broker's responses
// and written with the head, however the head is written; the broker's values win over the
// route's and the MCP server's, Vary is merged. Who must not get around them: an MCP server that
// answers with its own, weaker security headers or another request id.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { listen, type RunningServer } from "../../src/http/server.ts";
import { BrokerResponse, carryOnEveryAnswer, carryRequestId, writeHeadWith } from "../../src/http/answer-headers.ts";
import { startGateway, type TestGateway } from "../gateway/harness.ts";

describe("headers carried to the head of a broker response", () => {
  let server: RunningServer;
  let url: string;
  /** What each test's handler does with the response, after the carried headers are given. */
  let answer: (res: http.ServerResponse) => void = (res) => res.end();

  beforeAll(async () => {
    server = await listen(
      (_req, res) => {
        carryOnEveryAnswer(res, ["x-frame-options", "DENY", "vary", "Origin"]);
        carryRequestId(res, "request-id-1234");
        answer(res);
      },
      0,
      "127.0.0.1",
    );
    url = `http://127.0.0.1:${server.port}/`;
  });
  afterAll(async () => server.close(1000));

  const get = async (handler: (res: http.ServerResponse) => void) => {
    answer = handler;
    return fetch(url);
  };

  it("are on a head written by the first end(), over what the route set, Vary merged", async () => {
    const res = await get((r) => {
      expect(r).toBeInstanceOf(BrokerResponse);
      r.setHeader("X-Frame-Options", "SAMEORIGIN");
      r.setHeader("Vary", "Accept-Encoding");
      r.end("x");
    });
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("vary")).toBe("Accept-Encoding, Origin");
    expect(res.headers.get("x-request-id")).toBe("request-id-1234");
    expect(await res.text()).toBe("x");
  });

  it("are on a head written with an object, in both of writeHead's forms, and with a list", async () => {
    const withObject = await get((r) => r.writeHead(201, { "x-frame-options": "ALLOWALL", vary: "accept, origin" }).end());
    expect(withObject.status).toBe(201);
    expect(withObject.headers.get("x-frame-options")).toBe("DENY");
    expect(withObject.headers.get("vary")).toBe("accept, origin");

    const withReason = await get((r) => r.writeHead(202, "Taken", { "x-route": "1" }).end());
    expect(withReason.status).toBe(202);
    expect(withReason.statusText).toBe("Taken");
    expect(withReason.headers.get("x-route")).toBe("1");
    expect(withReason.headers.get("x-request-id")).toBe("request-id-1234");

    const withList = await get((r) => r.writeHead(200, ["x-twice", "1", "x-twice", "2", "vary", "*"]).end());
    expect(withList.headers.get("x-twice")).toBe("1, 2");
    expect(withList.headers.get("vary")).toBe("*");
    expect(withList.headers.get("x-frame-options")).toBe("DENY");
  });

  it("are on a head written with a handed-over object (the proxy's), over its values", async () => {
    const res = await get((r) => {
      writeHeadWith(r, 200, { "content-type": "application/json", "x-frame-options": "ALLOWALL", "x-request-id": "forged", vary: "Accept" });
      r.end("{}");
    });
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("x-request-id")).toBe("request-id-1234");
    expect(res.headers.get("vary")).toBe("Accept, Origin");
  });

  it("survive every header set before being removed (as Koa does for an error), and add up", async () => {
    const res = await get((r) => {
      carryOnEveryAnswer(r, ["x-second", "2"]);
      carryOnEveryAnswer(r, ["x-third", "3"]);
      r.setHeader("x-gone", "1");
      for (const name of r.getHeaderNames()) r.removeHeader(name);
      r.statusCode = 500;
      r.end();
    });
    expect(res.status).toBe(500);
    expect(res.headers.get("x-gone")).toBeNull();
    expect([res.headers.get("x-frame-options"), res.headers.get("x-second"), res.headers.get("x-third")]).toEqual(["DENY", "2", "3"]);
    expect(res.headers.get("x-request-id")).toBe("request-id-1234");
  });

  it("are set at once on a response of another server", async () => {
    const seen: Array<unknown> = [];
    const plain = http.createServer((_req, res) => {
      carryOnEveryAnswer(res, ["x-frame-options", "DENY", "vary", "Origin"]);
      carryRequestId(res, "request-id-5678");
      seen.push(res instanceof BrokerResponse, res.getHeader("x-frame-options"), res.getHeader("x-request-id"));
      res.end();
    });
    await new Promise<void>((resolve) => plain.listen(0, "127.0.0.1", resolve));
    try {
      const res = await fetch(`http://127.0.0.1:${(plain.address() as AddressInfo).port}/`);
      expect(res.headers.get("vary")).toBe("Origin");
      expect(seen).toEqual([false, "DENY", "request-id-5678"]);
    } finally {
      plain.closeAllConnections();
      await new Promise((resolve) => plain.close(resolve));
    }
  });
});

describe("an MCP server's own security headers and request id", () => {
  let upstream: http.Server;
  let gateway: TestGateway;
  const hostile = {
    "content-type": "application/json",
    "content-security-policy": "default-src *",
    "x-frame-options": "ALLOWALL",
    "x-content-type-options": "none",
    "referrer-policy": "unsafe-url",
    "x-request-id": "chosen-by-the-server",
    vary: "Accept",
  };

  beforeAll(async () => {
    upstream = http.createServer((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(200, hostile).end('{"jsonrpc":"2.0","id":1,"result":{}}'));
    });
    await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
    gateway = await startGateway({ targetUrl: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp` });
    await gateway.binding.claim("session-of-u", "test:u");
  });
  afterAll(async () => {
    await gateway.close();
    upstream.closeAllConnections();
    await new Promise((resolve) => upstream.close(resolve));
  });

  const expectBrokers = (res: Response, requestId: string) => {
    expect(res.status).toBe(200);
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; frame-ancestors 'none'");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("x-request-id")).toBe(requestId);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("vary")).toBe("Accept");
  };

  it("are replaced by the broker's on a call in a session (relayed straight from the MCP server's answer)", async () => {
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: {
        "x-test-user": "u",
        "mcp-session-id": "session-of-u",
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        "x-request-id": "client-request-1",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: {} } }),
    });
    expectBrokers(res, "client-request-1");
    expect(await res.json()).toEqual({ jsonrpc: "2.0", id: 1, result: {} });
  });

  it("are replaced by the broker's on a GET in a session (the head an event stream keeps)", async () => {
    const res = await fetch(gateway.url, {
      headers: { "x-test-user": "u", "mcp-session-id": "session-of-u", accept: "text/event-stream", "x-request-id": "client-request-3" },
    });
    expectBrokers(res, "client-request-3");
    await res.text();
  });

  it("are replaced by the broker's on an answer outside a session", async () => {
    const res = await fetch(gateway.url, {
      method: "POST",
      headers: { "x-test-user": "u", "content-type": "application/json", accept: "application/json, text/event-stream", "x-request-id": "client-request-2" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
    });
    expectBrokers(res, "client-request-2");
  });
});
