// A stdio server command that cannot start: the client gets a JSON-RPC 502 that says so (never a
// 500 or a hanging request), the operator a log line naming the cause and what to check.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startLoggedBroker, type LoggedBroker } from "../http/logged-broker.ts";
import { bearerFor, initializeRequest } from "./stdio-support.ts";

describe("a stdio server that cannot start", () => {
  let t: LoggedBroker;
  beforeAll(async () => {
    t = await startLoggedBroker({ MCP_SERVER_COMMAND: "/nonexistent/mcp-server --stdio" });
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
  });

  it("answers 502 and logs what to check", async () => {
    const auth = await bearerFor(t.url, "olga");
    const res = await initializeRequest(`${t.url}/mcp`, auth);
    expect(res.status).toBe(502);
    expect(await res.json()).toMatchObject({ jsonrpc: "2.0", error: { message: "The MCP server could not be started." } });
    const line = await t.logged((l) => /could not be started/.test(l.msg));
    expect(line.msg).toContain("MCP_SERVER_COMMAND");
    expect(line.err).toContain("ENOENT");
    expect(t.broker.stdioSessions!.size).toBe(0);
  });
});
