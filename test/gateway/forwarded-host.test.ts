// X-Forwarded-* at the MCP server (attack trial, item 10): the host is PUBLIC_URL's, never the
// client's Host, with TRUST_PROXY off or on; the scheme is PUBLIC_URL's unless a trusted proxy
// names it; the client address is the real peer unless a trusted proxy names it. Requests are
// written raw on a socket so that the Host header is exactly the one an attacker chose.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import { freePort, startBroker, type TestBroker } from "../support/start-broker.ts";
import { basicAuth, postForm, registerOperatorClient } from "../support/oauth-client.ts";
import { startGateway } from "./harness.ts";
import { rawRequest } from "./raw-request.ts";

let upstream: Server;
let upstreamUrl: string;
const received: IncomingHttpHeaders[] = [];

beforeAll(async () => {
  upstream = createServer((req, res) => {
    received.push(req.headers);
    req.resume();
    res.writeHead(200, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","id":1,"result":{}}');
  });
  await new Promise<void>((resolve) => upstream.listen(0, "127.0.0.1", resolve));
  const address = upstream.address();
  upstreamUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}/mcp`;
});

afterAll(async () => {
  await new Promise((resolve) => upstream.close(resolve));
});

const FORGED = { Host: "evil.example", "X-Forwarded-Host": "evil2.example", Forwarded: "host=evil3.example" };
const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
const jsonHeaders = { "content-type": "application/json", accept: "application/json, text/event-stream" };

/** One POST /mcp with `headers`; the headers the MCP server received for it. */
async function forwardedFor(port: number, headers: Record<string, string>): Promise<IncomingHttpHeaders> {
  const before = received.length;
  const res = await rawRequest(port, "POST", "/mcp", { ...jsonHeaders, ...headers }, body);
  expect(res.status).toBe(200);
  expect(received.length).toBe(before + 1);
  return received[before]!;
}

describe("the proxy with a PUBLIC_URL", () => {
  it("sends PUBLIC_URL's host and scheme, not the client's Host", async () => {
    const gateway = await startGateway({ targetUrl: upstreamUrl, publicUrl: "https://broker.example/base" });
    try {
      const seen = await forwardedFor(Number(new URL(gateway.url).port), { ...FORGED, "x-test-user": "alice", "X-Forwarded-For": "6.6.6.6" });
      expect(seen["x-forwarded-host"]).toBe("broker.example");
      expect(seen["x-forwarded-proto"]).toBe("https");
      expect(seen["x-forwarded-for"]).toBe("127.0.0.1");
      expect(seen.host).not.toContain("evil");
    } finally {
      await gateway.close();
    }
  });
});

async function brokerWith(scheme: "http" | "https", trustProxy: boolean): Promise<{ t: TestBroker; port: number; token: string }> {
  const port = await freePort();
  // PUBLIC_URL names localhost while the broker listens on 127.0.0.1 (over plain HTTP, as behind
  // a TLS-terminating proxy): the host sent upstream can only be PUBLIC_URL's, neither the
  // client's nor the socket's.
  const t = await startBroker({
    PORT: String(port),
    PUBLIC_URL: `${scheme}://localhost:${port}`,
    MCP_SERVER_URL: upstreamUrl,
    TRUST_PROXY: String(trustProxy),
  });
  const client = await registerOperatorClient(t.broker.database.db);
  const res = await postForm(`${t.origin}/token`, { grant_type: "client_credentials" }, { authorization: basicAuth(client.client_id, client.client_secret!) });
  expect(res.status).toBe(200);
  return { t, port, token: String(res.json!.access_token) };
}

describe("the broker", () => {
  it("with TRUST_PROXY=false: PUBLIC_URL's host and scheme, the real peer", async () => {
    const { t, port, token } = await brokerWith("https", false);
    try {
      const seen = await forwardedFor(port, { ...FORGED, authorization: `Bearer ${token}`, "X-Forwarded-For": "6.6.6.6", "X-Forwarded-Proto": "gopher" });
      expect(seen["x-forwarded-host"]).toBe(`localhost:${port}`);
      expect(seen["x-forwarded-proto"]).toBe("https");
      expect(seen["x-forwarded-for"]).toBe("127.0.0.1");
    } finally {
      await t.stop();
    }
  });

  it("with TRUST_PROXY=true: still PUBLIC_URL's host; scheme and client address as the trusted proxy says", async () => {
    const { t, port, token } = await brokerWith("http", true);
    try {
      const seen = await forwardedFor(port, { ...FORGED, authorization: `Bearer ${token}`, "X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https" });
      expect(seen["x-forwarded-host"]).toBe(`localhost:${port}`);
      expect(seen["x-forwarded-proto"]).toBe("https");
      expect(seen["x-forwarded-for"]).toBe("203.0.113.9");
    } finally {
      await t.stop();
    }
  });
});
