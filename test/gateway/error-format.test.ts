// The error format of /mcp as a real broker serves it (createBroker, its own router wiring): every
// error an MCP client gets there has a JSON-RPC error body, whichever part of the route raised it
// (bearer authentication, the proxy, an in-process handler, an unexpected fault), and the 401/403
// keep their RFC 6750 challenge. The database outage case is in test/http/database-outage.test.ts
// and test/gateway/fault-survival.test.ts.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { freePort, startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";

const jsonRpcError = (message: RegExp | string) => ({
  jsonrpc: "2.0",
  error: { code: expect.any(Number), message: typeof message === "string" ? message : expect.stringMatching(message) },
  id: null,
});
const post = (url: string, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" }),
  });

describe("/mcp errors of a broker proxying to an MCP server that is down", () => {
  let t: TestBroker;
  let auth: Record<string, string>;
  beforeAll(async () => {
    // A port nothing listens on.
    t = await startBroker({ MCP_SERVER_URL: `http://127.0.0.1:${await freePort()}/mcp` });
    auth = { authorization: `Bearer ${(await obtainTokens(t.url, { user: "format" })).tokens.access_token}` };
  });
  afterAll(async () => t.stop());

  it("401 without a token: the challenge in WWW-Authenticate, the reason in a JSON-RPC error", async () => {
    for (const url of [`${t.url}/mcp`, `${t.url}/mcp/below`]) {
      const res = await post(url);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain(`resource_metadata="${t.url}/.well-known/oauth-protected-resource/mcp"`);
      expect(await res.json()).toEqual(jsonRpcError(/Authorization required/));
    }
  });

  it("401 for an unknown token: invalid_token in the challenge, a JSON-RPC error body", async () => {
    const res = await post(`${t.url}/mcp`, { authorization: "Bearer mab_at_unknown" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
    expect(await res.json()).toEqual(jsonRpcError(/not valid/));
  });

  it("502 when the MCP server cannot be reached, 405 for a method MCP does not use", async () => {
    const down = await post(`${t.url}/mcp`, auth);
    expect(down.status).toBe(502);
    expect(await down.json()).toEqual(jsonRpcError("The MCP server is unreachable."));
    const put = await fetch(`${t.url}/mcp`, { method: "PUT", headers: auth, body: "{}" });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("GET, POST, DELETE");
    expect(await put.json()).toEqual(jsonRpcError(/not allowed/));
  });
});

describe("/mcp errors of a broker serving MCP in-process (library use)", () => {
  let t: TestBroker;
  let auth: Record<string, string>;
  beforeAll(async () => {
    t = await startBroker(
      {},
      {
        mcpHandler: async (ctx) => {
          if (ctx.path === "/mcp/fault") throw new Error("the handler broke");
          if (ctx.path === "/mcp") ctx.body = { jsonrpc: "2.0", id: 1, result: {} };
          // Anything else is left unanswered: Koa's 404.
        },
      },
    );
    auth = { authorization: `Bearer ${(await obtainTokens(t.url, { user: "library" })).tokens.access_token}` };
  });
  afterAll(async () => t.stop());

  it("404 for a path below /mcp the handler does not serve", async () => {
    expect((await post(`${t.url}/mcp`, auth)).status).toBe(200);
    const res = await post(`${t.url}/mcp/nowhere`, auth);
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual(jsonRpcError(/No endpoint at POST \/mcp\/nowhere/));
  });

  it("500 for an unexpected fault, with a reference and no details", async () => {
    const res = await post(`${t.url}/mcp/fault`, auth);
    expect(res.status).toBe(500);
    const body = (await res.json()) as { error: { message: string } };
    expect(body).toEqual(jsonRpcError(/unexpected error/));
    expect(body.error.message).not.toContain("the handler broke");
  });

  it("other routes keep their own format (OAuth JSON)", async () => {
    const res = await fetch(`${t.url}/nowhere`);
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({ error: "not_found" });
  });
});
