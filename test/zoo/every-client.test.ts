// Every client of the zoo in one run, through both backends: each connects as it really does
// (test/zoo/replays.ts cites what each sends) and then calls a tool, in front of an MCP server
// reached over HTTP and in front of a stdio server the broker starts per user. Beside them the MCP
// SDK clients run their own OAuth flow: v1 in the 2025 era (sessions) and v2 pinned to MCP
// 2026-07-28 (no initialize, no session, Mcp-Method/Mcp-Name headers).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { keySet, signingKey } from "../support/client-assertion.ts";
import { startDocumentServer, type DocumentServer } from "../support/document-server.ts";
import { answerAs, HttpBrowser } from "../support/http-browser.ts";
import { CallbackServer, connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { connectV2WithOAuth } from "../support/v2-client.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { fixtureEnv } from "../stdio/stdio-support.ts";
import { CHATGPT_KID, publishZooDocuments, ZOO, type ZooWorld } from "./replays.ts";

let docs: DocumentServer;
let world: ZooWorld;
/** An MCP server of both eras (SDK v2): 2025 sessions and 2026-07-28 stateless requests. */
let server: V2McpServer;
let callback: CallbackServer;

beforeAll(async () => {
  docs = await startDocumentServer(["chatgpt.com", "claude.ai"]);
  world = { docs, chatgptKey: await signingKey(CHATGPT_KID, "RS256") };
  publishZooDocuments(world, keySet(world.chatgptKey));
  [server, callback] = await Promise.all([startV2McpServer(), new CallbackServer().start()]);
});
afterAll(async () => {
  await callback?.close();
  await server?.close();
  await docs?.close();
});

/** The text of an `echo` call made with `accessToken`, by an MCP client over Streamable HTTP. */
async function echoWith(brokerUrl: string, accessToken: string, message: string): Promise<string> {
  const client = new Client({ name: "zoo-tool-call", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${brokerUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${accessToken}` } } });
  await client.connect(transport);
  try {
    const result = (await client.callTool({ name: "echo", arguments: { message } })) as { content: Array<{ text: string }> };
    return result.content[0]!.text;
  } finally {
    await transport.terminateSession().catch(() => undefined);
    await client.close();
  }
}

/** The demo user `user` signs in and consents wherever the SDK client sends the browser. */
const signIn = (user: string) => async (url: URL) => {
  await fetch(await new HttpBrowser().walk(url.href, callback.url, answerAs(user)));
};

const backends: Array<[string, () => Record<string, string>]> = [
  ["the HTTP proxy", () => ({ MCP_SERVER_URL: server.url })],
  ["the stdio bridge", () => fixtureEnv()],
];

describe.each(backends)("every client through %s", (_backend, backendEnv) => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startBroker(
      { ...backendEnv(), CIMD_ALLOW_PRIVATE_NETWORKS: "true" },
      { documentFetch: { lookup: docs.lookup({ "chatgpt.com": "127.0.0.1", "claude.ai": "127.0.0.1" }), ca: docs.caCert } },
    );
  });
  afterAll(async () => broker?.stop());

  it.each(ZOO.map((client, i) => [client.name, client, i] as const))("%s connects and calls a tool", async (name, client, i) => {
    const user = `zoo-user-${i}`;
    const { clientId, tokens } = await client.connect(world, broker.url, user);
    expect(await echoWith(broker.url, tokens.access_token, `hello from ${name}`)).toBe(`hello from ${name}`);
    const grant = await broker.broker.database.db.grant.findFirstOrThrow({ where: { clientId } });
    expect(grant.subject).toBe(`demo:${user}`);
  });

  it("the MCP SDK v1 client, through its own OAuth flow (2025 era, a session)", async () => {
    const connected = await connectWithOAuth(`${broker.url}/mcp`, callback, signIn("sdk-v1"));
    try {
      const result = (await connected.client.callTool({ name: "echo", arguments: { message: "v1" } })) as { content: Array<{ text: string }> };
      expect(result.content[0]!.text).toBe("v1");
    } finally {
      await connected.transport.terminateSession().catch(() => undefined);
      await connected.client.close();
    }
  });

  it("the MCP SDK v2 client pinned to 2026-07-28, through its own OAuth flow (stateless)", async () => {
    const connected = await connectV2WithOAuth(`${broker.url}/mcp`, "2026-07-28", callback, signIn("sdk-v2"));
    try {
      expect(connected.client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
      const result = (await connected.client.callTool({ name: "echo", arguments: { message: "v2" } })) as { content: Array<{ text: string }> };
      expect(result.content[0]!.text).toBe("v2");
    } finally {
      await connected.client.close();
    }
  });
});
