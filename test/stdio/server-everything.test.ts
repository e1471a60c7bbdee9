// @modelcontextprotocol/server-everything in stdio mode behind the broker, driven by the real SDK
// client through its real OAuth flow: the reference server's environment, progress and sampling
// requests reach the client through the bridge. The reference server speaks the revisions with
// initialize; the SDK v2 client pinned to 2026-07-28 uses it through the bridge all the same.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateMessageRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer, connectWithOAuth, TestOAuthProvider } from "../support/mcp-oauth-client.ts";
import { projectRoot } from "../support/spawn.ts";
import { connectV2WithOAuth } from "../support/v2-client.ts";
import { callText, signInAs } from "./stdio-support.ts";

const everything = path.join(projectRoot, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

describe("server-everything (stdio) through the broker", () => {
  let t: TestBroker;
  let callback: CallbackServer;
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  beforeAll(async () => {
    // Something of the broker's own environment the child must not see.
    process.env.MAB_TEST_BROKER_SECRET = "must-not-leak";
    [t, callback] = await Promise.all([
      startBroker({ MCP_SERVER_COMMAND: `"${process.execPath}" "${everything}" stdio`, MCP_SERVER_TOKEN_ENV: "GITHUB_PERSONAL_ACCESS_TOKEN" }),
      new CallbackServer().start(),
    ]);
    const provider = new TestOAuthProvider(callback.url, signInAs("mona", callback));
    // The OAuth flow first, then a client that offers sampling (server-everything registers its
    // sampling tool only for such clients).
    const first = await connectWithOAuth(`${t.url}/mcp`, callback, signInAs("mona", callback), provider);
    await first.transport.terminateSession();
    await first.client.close();
    client = new Client({ name: "everything-e2e", version: "1" }, { capabilities: { sampling: {} } });
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => ({
      role: "assistant",
      content: { type: "text", text: `sampled: ${JSON.stringify(request.params.messages[0]?.content)}` },
      model: "test-model",
    }));
    transport = new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { authProvider: provider });
    await client.connect(transport);
  }, 30_000);
  afterAll(async () => {
    delete process.env.MAB_TEST_BROKER_SECRET;
    await transport?.terminateSession().catch(() => undefined);
    await client?.close();
    await t?.stop();
    await callback?.close();
  });

  it("runs the server with the user's token and without the broker's environment", async () => {
    const env = JSON.parse(await callText(client, "get-env")) as Record<string, string>;
    const session = await t.broker.database.db.upstreamSession.findFirstOrThrow({ where: { login: "mona" } });
    expect(env.GITHUB_PERSONAL_ACCESS_TOKEN).toBe((await t.broker.services.grants.sessions.tokensOf(session.id))?.accessToken);
    expect(env.MAB_TEST_BROKER_SECRET).toBeUndefined();
    expect(env.NODE_OPTIONS).toBeUndefined();
  });

  it("carries progress notifications before the result", async () => {
    const progress: number[] = [];
    const result = CallToolResultSchema.parse(
      await client.callTool({ name: "trigger-long-running-operation", arguments: { duration: 0.2, steps: 3 } }, undefined, {
        onprogress: (p) => progress.push(p.progress),
      }),
    );
    expect(progress).toEqual([1, 2, 3]);
    expect(result.content[0]).toMatchObject({ type: "text", text: expect.stringContaining("Long running operation completed") });
  });

  it("serves the SDK v2 client pinned to 2026-07-28, progress included", async () => {
    const v2 = await connectV2WithOAuth(`${t.url}/mcp`, "2026-07-28", callback, signInAs("nell", callback));
    try {
      expect(v2.client.getProtocolEra()).toBe("modern");
      expect((await v2.client.listTools()).tools.map((tool) => tool.name)).toContain("echo");
      const echo = await v2.client.callTool({ name: "echo", arguments: { message: "from 2026" } });
      expect(echo.content[0]).toMatchObject({ type: "text", text: expect.stringContaining("from 2026") });
      const progress: number[] = [];
      const long = await v2.client.callTool(
        { name: "trigger-long-running-operation", arguments: { duration: 0.2, steps: 3 } },
        { onprogress: (p) => progress.push(p.progress) },
      );
      expect(progress).toEqual([1, 2, 3]);
      expect(long.content[0]).toMatchObject({ type: "text", text: expect.stringContaining("Long running operation completed") });
    } finally {
      await v2.client.close();
    }
  });

  it("carries the server's sampling request to the client and its answer back", async () => {
    const text = await callText(client, "trigger-sampling-request", { prompt: "hello?", maxTokens: 5 });
    expect(text).toContain("sampled:");
    expect(text).toContain("hello?");
  });
});
