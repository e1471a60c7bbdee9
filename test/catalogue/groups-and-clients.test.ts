// One broker, three MCP servers from a configuration file — two over Streamable HTTP (the recording
// server built on the MCP SDK v2, and the demo server built on the SDK v1's McpServer) and one
// stdio — with users signing in at a real OIDC issuer whose accounts sit in different groups. Each
// user connects with the real MCP SDK clients, v1 and v2, doing their own OAuth flow, to the servers
// their groups open; a server their groups do not open refuses them at sign-in (no code, no grant);
// a token for one server is refused at another before anything reaches it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { connectWithOAuth, TestOAuthProvider } from "../support/mcp-oauth-client.ts";
import { connectV2WithOAuth } from "../support/v2-client.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { INITIALIZE_MESSAGE, mcpPostTo } from "../support/mcp-probe.ts";
import { startIssuerCatalogue, type IssuerCatalogue } from "../support/issuer-catalogue.ts";
import { fixtureCommand } from "../stdio/stdio-support.ts";
import { toolText } from "../gateway/harness.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";

/** The issuer's accounts and their groups: ada runs the platform, bo works in support. */
const GROUPS: Record<string, string[]> = { ada: ["staff", "platform"], bo: ["staff", "support"] };

let records: V2McpServer;
let demo: DemoMcpServer;
let at: IssuerCatalogue;

const mcpAt = (name: string) => at.mcpAt(name);
const signInAs = (user: string) => at.signInAs(user);

beforeAll(async () => {
  [records, demo] = await Promise.all([startV2McpServer(), startDemoMcpServer()]);
  at = await startIssuerCatalogue(GROUPS, [
    "servers:",
    "  - name: records",
    "    title: Records",
    `    url: ${records.url}`,
    "    access: { groups: [platform] }",
    "  - name: demo",
    "    title: Demo tools",
    `    url: ${demo.url}`,
    "  - name: local",
    "    title: Local tools",
    `    command: ${JSON.stringify(fixtureCommand)}`,
    "    access: { groups: [support] }",
  ]);
}, 30_000);
afterAll(async () => {
  await at?.close();
  await Promise.all([records?.close(), demo?.close()]);
});

/**
 * The SDK v1 client's OAuth flow for `user` at a server whose rules refuse them: what the user's
 * browser was shown, and whether anything reached the client's redirect URI.
 */
async function refusedConnect(url: string, user: string): Promise<{ shown: string; thrown: unknown }> {
  let shown = "";
  const provider = new TestOAuthProvider(at.callback.url, async (authorization) => {
    try {
      await new HttpBrowser().walk(authorization.href, at.callback.url, answerAs(user));
      shown = "the redirect URI";
    } catch (err) {
      shown = String(err);
    }
  });
  const client = new Client({ name: "refused", version: "1.0.0" });
  const thrown = await client.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider })).catch((err: unknown) => err);
  return { shown, thrown };
}

const grantsFor = (server: string) => at.broker.broker.database.db.grant.findMany({ where: { resource: mcpAt(server) }, include: { upstreamSession: true } });

describe("three servers, two groups, both SDK generations", () => {
  it("publishes each server's protected resource metadata naming its own resource", async () => {
    for (const [name, title] of [
      ["records", "Records"],
      ["demo", "Demo tools"],
      ["local", "Local tools"],
    ] as const) {
      const res = await fetch(`${at.broker.url}/.well-known/oauth-protected-resource/mcp/${name}`);
      expect(await res.json()).toMatchObject({ resource: mcpAt(name), resource_name: title, authorization_servers: [at.broker.url] });
    }
  });

  it("ada (platform) uses the records server with the SDK v1 client and the demo server with the SDK v2 client", async () => {
    const v1 = await connectWithOAuth(mcpAt("records"), at.callback, signInAs("ada"));
    try {
      expect((await v1.client.listTools()).tools.map((tool) => tool.name).sort()).toEqual(["echo", "query"]);
      expect(toolText(await v1.client.callTool({ name: "echo", arguments: { message: "from ada" } }))).toBe("from ada");
    } finally {
      await v1.client.close();
    }
    const call = records.requests.find((r) => r.body.includes("from ada"));
    expect(call?.headers).toMatchObject({ "x-auth-user": "ada", "x-auth-server": "records" });
    expect(call?.headers.authorization).toBeUndefined();

    const v2 = await connectV2WithOAuth(mcpAt("demo"), "auto", at.callback, signInAs("ada"));
    try {
      expect((await v2.client.listTools()).tools.map((tool) => tool.name)).toContain("echo");
      expect(toolText(await v2.client.callTool({ name: "echo", arguments: { message: "v2 at demo" } }))).toBe("v2 at demo");
    } finally {
      await v2.client.close();
    }
    // Each connection's grant is for its own server, behind ada's sign-in at the issuer.
    const [recordsGrant] = await grantsFor("records");
    const [demoGrant] = await grantsFor("demo");
    expect(recordsGrant?.upstreamSession?.login).toBe("ada");
    expect(demoGrant?.upstreamSession?.login).toBe("ada");
  });

  it("bo (support) uses the stdio server with the SDK v2 client in 2026-07-28, and the demo server with the SDK v1 client", async () => {
    const v2 = await connectV2WithOAuth(mcpAt("local"), "2026-07-28", at.callback, signInAs("bo"));
    try {
      expect(v2.client.getNegotiatedProtocolVersion()).toBe("2026-07-28");
      expect((await v2.client.listTools()).tools.map((tool) => tool.name)).toContain("whoami");
      expect(toolText(await v2.client.callTool({ name: "echo", arguments: { message: "bo at local" } }))).toBe("bo at local");
    } finally {
      await v2.client.close();
    }
    const v1 = await connectWithOAuth(mcpAt("demo"), at.callback, signInAs("bo"));
    try {
      expect(toolText(await v1.client.callTool({ name: "echo", arguments: { message: "bo at demo" } }))).toBe("bo at demo");
    } finally {
      await v1.client.close();
    }
  });

  it("a server whose rules do not admit the user refuses at sign-in: no code reaches the client, no grant exists", async () => {
    const before = records.requests.length;
    const bo = await refusedConnect(mcpAt("records"), "bo");
    expect(bo.thrown).toBeInstanceOf(UnauthorizedError);
    expect(bo.shown).toMatch(/status 403/);
    expect(bo.shown).toContain("Records");
    expect(records.requests.length).toBe(before);
    expect((await grantsFor("records")).map((g) => g.upstreamSession?.login)).not.toContain("bo");

    const ada = await refusedConnect(mcpAt("local"), "ada");
    expect(ada.shown).toMatch(/status 403/);
    expect((await grantsFor("local")).map((g) => g.upstreamSession?.login)).not.toContain("ada");
  });

  it("a token for one server is refused at every other (401 invalid_token), and nothing reaches them", async () => {
    const v1 = await connectWithOAuth(mcpAt("demo"), at.callback, signInAs("ada"));
    const demoToken = v1.provider.savedTokens!.access_token;
    await v1.client.close();
    const before = records.requests.length;
    for (const other of ["records", "local"]) {
      const res = await mcpPostTo(mcpAt(other), demoToken, INITIALIZE_MESSAGE);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
      expect(res.headers.get("www-authenticate")).toContain(`/.well-known/oauth-protected-resource/mcp/${other}`);
      await res.body?.cancel();
    }
    expect(records.requests.length).toBe(before);
  });
});
