// Several broker instances on one PostgreSQL database behind a load balancer, in front of one MCP
// server: a user's MCP session opened through one instance stays theirs on every other instance,
// and the session goes on whichever instance a request reaches.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startTwoInstances, type TestBroker, type TwoInstances } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { createPostgresDatabase, postgresAvailable } from "../support/pg-database.ts";
import type { DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { connectClient, sessionHeaders, toolText } from "./harness.ts";

const describeWithPostgres = postgresAvailable ? describe : describe.skip;
if (!postgresAvailable) process.stdout.write("[notice] PostgreSQL not available: the multi-instance tests are skipped\n");

describeWithPostgres("two broker instances sharing PostgreSQL", () => {
  let instances: TwoInstances;
  let first: TestBroker;
  let second: TestBroker;
  let mcpServer: DemoMcpServer;
  let dropDatabase: () => Promise<void>;
  beforeAll(async () => {
    const database = await createPostgresDatabase();
    dropDatabase = database.drop;
    instances = await startTwoInstances(database.url);
    ({ first, second, mcpServer } = instances);
  }, 60_000);
  afterAll(async () => {
    await instances.stop();
    await dropDatabase();
  });

  const jsonRpc = (origin: string, headers: Record<string, string>, body: unknown) =>
    fetch(`${origin}/mcp`, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify(body),
    });

  it("a session opened on one instance is refused to another user on the other, and not forwarded", async () => {
    const alice = await obtainTokens(first.url, { user: "alice" });
    const mallory = await obtainTokens(first.url, { user: "mallory" });
    const { client, transport } = await connectClient(`${first.origin}/mcp`, { authorization: `Bearer ${alice.tokens.access_token}` });
    try {
      const stolen = await jsonRpc(second.origin, sessionHeaders(transport, { authorization: `Bearer ${mallory.tokens.access_token}` }), {
        jsonrpc: "2.0",
        id: 5,
        method: "tools/list",
      });
      expect(stolen.status).toBe(403);
      // (The SDK's own GET stream may arrive meanwhile: look for the intruder, not at a count.)
      expect(mcpServer.requests.filter((r) => r.headers["x-auth-subject"] === "demo:mallory")).toEqual([]);

      // Its owner goes on through the other instance.
      const own = await jsonRpc(second.origin, sessionHeaders(transport, { authorization: `Bearer ${alice.tokens.access_token}` }), {
        jsonrpc: "2.0",
        id: 6,
        method: "tools/call",
        params: { name: "whoami", arguments: {} },
      });
      expect(own.status).toBe(200);
      expect(await own.text()).toContain("demo:alice");
      expect(JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} }))).subject).toBe("demo:alice");
    } finally {
      await transport.terminateSession().catch(() => undefined);
      await client.close();
    }
  });

  it("an id the MCP server never issued is 404 on every instance, and never forwarded", async () => {
    const guesser = await obtainTokens(first.url, { user: "guesser" });
    for (const instance of [first, second]) {
      const res = await jsonRpc(
        instance.origin,
        { authorization: `Bearer ${guesser.tokens.access_token}`, "mcp-session-id": "guessed-123" },
        { jsonrpc: "2.0", id: 1, method: "tools/list" },
      );
      expect(res.status).toBe(404);
    }
    expect(mcpServer.requests.filter((r) => r.headers["x-auth-subject"] === "demo:guesser")).toEqual([]);
  });
});
