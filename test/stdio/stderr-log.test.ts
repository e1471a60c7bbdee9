// A stdio server's stderr reaches the broker log, each line marked with the server and its pid, and
// no more than the rate limit allows: a looping child cannot flood the log.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startLoggedBroker, type LoggedBroker } from "../http/logged-broker.ts";
import { STDERR_LINES_PER_WINDOW } from "../../src/stdio/stderr-log.ts";
import { bearerFor, MCP_HEADERS, fixtureEnv, nextMessage, openSession, sseMessages } from "./stdio-support.ts";

describe("a stdio server's stderr", () => {
  let t: LoggedBroker;
  beforeAll(async () => {
    t = await startLoggedBroker(fixtureEnv());
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
  });

  it("goes to the broker log, marked and rate-limited", async () => {
    const auth = await bearerFor(t.url, "nina");
    const session = await openSession(`${t.url}/mcp`, auth);
    const pid = t.broker.stdioSessions!.find(session)!.child.pid;
    const res = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: { ...MCP_HEADERS, ...auth, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "stderr", arguments: { lines: 3 * STDERR_LINES_PER_WINDOW } } }),
    });
    await nextMessage(sseMessages(res));
    await t.logged((l) => /dropping the rest/.test(l.msg));
    // stderr and stdout are separate pipes: wait for the last line the limit lets through.
    await t.logged((l) => l.stderr === `fixture line ${STDERR_LINES_PER_WINDOW - 1}`);
    const lines = t.logs.filter((l) => typeof l.stderr === "string" && l.stderr.startsWith("fixture line"));
    expect(lines).toHaveLength(STDERR_LINES_PER_WINDOW);
    expect(lines[0]).toMatchObject({ msg: "stdio MCP server", pid, stderr: "fixture line 0" });
    expect(t.logs.filter((l) => /dropping the rest/.test(l.msg))).toHaveLength(1);
  });
});
