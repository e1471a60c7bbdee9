// Permissions per tool as the real MCP SDK clients (v1 and v2) meet them through a real broker, in
// front of the SDK's own server answering in JSON and in SSE: users of a real OIDC issuer in
// different groups sign in through the clients' own OAuth flow, and read the filtered tools/list
// pages and the broker's refusals as they read a server's.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { TOOL_NOT_PERMITTED } from "../../src/gateway/tool-calls.ts";
import { connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { connectV2WithOAuth } from "../support/v2-client.ts";
import { startIssuerCatalogue, type IssuerCatalogue } from "../support/issuer-catalogue.ts";

/** Bob sells; Alice runs the platform. */
const GROUPS: Record<string, string[]> = { bob: ["staff", "sales"], alice: ["staff", "platform"] };
/** The rules of both servers: deleting is for the platform group, the admin tools for nobody. */
const TOOL_RULES = ["    tools:", '      - { match: "delete_*", allow: { groups: [platform] } }', '      - { match: "admin_*", deny: true }'];

/** Three pages of tools, as a server with a long list sends them (nextCursor). */
const PAGES = [
  ["search", "delete_page", "read_page"],
  ["admin_reset", "admin_purge"], // every tool of this page is hidden from Bob
  ["write_page", "delete_site"],
];

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
}

/** The SDK's own server, stateless, answering in JSON or SSE; it counts the tools it ran. */
async function startSdkServer(json: boolean) {
  const ran: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const mcp = new Server({ name: "paged", version: "1.0.0" }, { capabilities: { tools: {} } });
        mcp.setRequestHandler(ListToolsRequestSchema, async (r) => {
          const page = Number(r.params?.cursor ?? 0);
          const tools = PAGES[page]!.map((name) => ({ name, description: `The ${name} tool`, inputSchema: { type: "object" as const } }));
          return { tools, ...(page + 1 < PAGES.length ? { nextCursor: String(page + 1) } : {}) };
        });
        mcp.setRequestHandler(CallToolRequestSchema, async (r) => {
          ran.push(r.params.name);
          return { content: [{ type: "text", text: `ran ${r.params.name}` }] };
        });
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: json });
        res.on("close", () => void transport.close());
        await mcp.connect(transport);
        await transport.handleRequest(req, res, chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined);
      })().catch((err: unknown) => res.writeHead(500).end(String(err)));
    });
  });
  return { url: await listen(server), ran, server };
}

/** Every tool name the client is shown, page by page, and the cursors it followed. */
async function allTools(client: Client): Promise<{ names: string[][]; cursors: (string | undefined)[] }> {
  const names: string[][] = [];
  const cursors: (string | undefined)[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor });
    names.push(page.tools.map((t) => t.name));
    cursor = page.nextCursor;
    cursors.push(cursor);
  } while (cursor !== undefined);
  return { names, cursors };
}

const servers: http.Server[] = [];
const backends: Record<"json" | "sse", Awaited<ReturnType<typeof startSdkServer>>> = {} as never;
let at: IssuerCatalogue;

beforeAll(async () => {
  for (const format of ["json", "sse"] as const) {
    backends[format] = await startSdkServer(format === "json");
    servers.push(backends[format].server);
  }
  at = await startIssuerCatalogue(GROUPS, [
    "servers:",
    ...(["json", "sse"] as const).flatMap((format) => [`  - name: ${format}`, `    url: ${backends[format].url}`, ...TOOL_RULES]),
  ]);
}, 30_000);
afterAll(async () => {
  await at?.close();
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** `user` connects to the `format` server with the SDK v1 client, through its OAuth flow. */
async function connect(format: "json" | "sse", user: string): Promise<Client> {
  return (await connectWithOAuth(at.mcpAt(format), at.callback, at.signInAs(user))).client;
}

describe.each(["json", "sse"] as const)("the SDK client, answers in %s", (format) => {
  it("is shown only the tools its user may call, page by page, every cursor kept", async () => {
    const connected = await connectWithOAuth(at.mcpAt(format), at.callback, at.signInAs("bob"));
    const client = connected.client;
    try {
      expect(await allTools(client)).toEqual({ names: [["search", "read_page"], [], ["write_page"]], cursors: ["1", "2", undefined] });
      // The answer the broker rewrote kept its format.
      const raw = await fetch(at.mcpAt(format), {
        method: "POST",
        headers: {
          authorization: `Bearer ${connected.provider.savedTokens!.access_token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/list", params: { cursor: "1" } }),
      });
      expect(raw.headers.get("content-type")).toMatch(format === "json" ? /^application\/json/ : /^text\/event-stream/);
      const text = await raw.text();
      expect(text).toContain('"nextCursor":"2"');
      expect(text).not.toContain("admin_");
    } finally {
      await client.close();
    }
  });

  it("a user inside allow is shown the allowed tools, and never the denied ones", async () => {
    const client = await connect(format, "alice");
    try {
      expect((await allTools(client)).names).toEqual([["search", "delete_page", "read_page"], [], ["write_page", "delete_site"]]);
    } finally {
      await client.close();
    }
  });

  it("a refused call comes back as the SDK's McpError naming the tool, and never reaches the server", async () => {
    const client = await connect(format, "bob");
    const ranBefore = backends[format].ran.length;
    try {
      const refused = await client.callTool({ name: "delete_page", arguments: {} }).catch((err: unknown) => err);
      expect(refused).toBeInstanceOf(McpError);
      expect(refused).toMatchObject({ code: TOOL_NOT_PERMITTED, message: expect.stringContaining('The tool "delete_page" is not permitted for you') });
      expect(backends[format].ran.length).toBe(ranBefore);
      expect(await client.callTool({ name: "search", arguments: {} })).toMatchObject({ content: [{ type: "text", text: "ran search" }] });
      expect(backends[format].ran.slice(ranBefore)).toEqual(["search"]);
    } finally {
      await client.close();
    }
  });

  it("the SDK v2 client (2025 era) reads the same filtered pages and the same refusal", async () => {
    const { client } = await connectV2WithOAuth(at.mcpAt(format), "legacy", at.callback, at.signInAs("bob"));
    try {
      const names: string[][] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor });
        names.push(page.tools.map((t) => t.name));
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      // v2's listTools follows the cursors itself: one list, gathered from the three filtered pages.
      expect(names.flat()).toEqual(["search", "read_page", "write_page"]);
      const refused = await client.callTool({ name: "admin_reset", arguments: {} }).catch((err: unknown) => err);
      expect(refused).toMatchObject({ code: TOOL_NOT_PERMITTED, message: expect.stringContaining('The tool "admin_reset" is not permitted for you') });
    } finally {
      await client.close();
    }
  });
});
