// Permissions per tool as the real MCP SDK (v1) client meets them, in front of the SDK's own server
// answering in JSON and in SSE: the client reads the filtered tools/list pages and the broker's
// refusals as it reads a server's. Between them runs a relay with the steps the /mcp front end
// takes around its backends (strict parse, callsIn, decideCalls, ToolListFilter on the answer,
// with the proxy's own response headers), so the rewritten bytes are judged by a real client.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema, McpError } from "@modelcontextprotocol/sdk/types.js";
import { request } from "undici";
import type { AccessRules } from "../../src/config/catalogue.ts";
import { type ToolCaller, ToolPolicy } from "../../src/grants/tool-policy.ts";
import { clientResponseHeaders } from "../../src/gateway/proxy-headers.ts";
import { callsIn, decideCalls, parseRequestBody, TOOL_NOT_PERMITTED } from "../../src/gateway/tool-calls.ts";
import { ToolListFilter } from "../../src/gateway/tool-list-filter.ts";
import { connectV2 } from "../support/v2-client.ts";

const NOBODY: AccessRules = { users: [], emailDomains: [], githubOrgs: [], groups: [] };
const policy = new ToolPolicy([
  { match: "delete_*", allow: { ...NOBODY, groups: ["platform"] } },
  { match: "admin_*", deny: true },
]);
const bob: ToolCaller = { facts: { subject: "oidc:bob", login: "bob", groups: ["sales"] }, scopes: ["mcp"] };
const alice: ToolCaller = { facts: { subject: "oidc:alice", login: "alice", groups: ["platform"] }, scopes: ["mcp"] };

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

/** The front end's tool-policy steps around a forwarded request, for `caller`. */
async function startRelay(target: string, caller: ToolCaller) {
  /** The content types of the tools/list answers the relay filtered. */
  const filtered: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const body = Buffer.concat(chunks);
        let read = callsIn(undefined);
        if (req.method === "POST") {
          const parsed = parseRequestBody(body);
          if ("refusal" in parsed) return void res.writeHead(400, { "content-type": "application/json" }).end(JSON.stringify(parsed.refusal));
          read = callsIn(parsed.value);
          const verdict = decideCalls(policy, caller, read);
          if (verdict.kind === "answer") return void res.writeHead(verdict.status, { "content-type": "application/json" }).end(JSON.stringify(verdict.body));
          if (verdict.kind === "insufficient-scope") return void res.writeHead(403).end();
        }
        const headers: Record<string, string> = {};
        for (const name of ["content-type", "accept", "mcp-session-id", "mcp-protocol-version"]) {
          const value = req.headers[name];
          if (typeof value === "string") headers[name] = value;
        }
        const upstream = await request(target, { method: req.method as "GET" | "POST" | "DELETE", headers, body: req.method === "POST" ? body : null });
        const answerHeaders = clientResponseHeaders(upstream.headers);
        let answer: Readable = upstream.body;
        if (read.toolLists.length > 0) {
          const filter = new ToolListFilter({
            contentType: upstream.headers["content-type"] as string | undefined,
            contentEncoding: upstream.headers["content-encoding"] as string | undefined,
            answers: read,
            visible: (tool) => policy.visible(tool, caller),
          });
          filtered.push(String(upstream.headers["content-type"]));
          res.writeHead(upstream.statusCode, filter.responseHeaders(answerHeaders));
          answer = upstream.body.pipe(filter);
        } else res.writeHead(upstream.statusCode, answerHeaders);
        answer.pipe(res);
      })().catch((err: unknown) => res.writeHead(502).end(String(err)));
    });
  });
  return { url: await listen(server), server, filtered };
}

async function connect(url: string): Promise<Client> {
  const client = new Client({ name: "tool-policy-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
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
const relays: Record<string, Awaited<ReturnType<typeof startRelay>>> = {};

beforeAll(async () => {
  for (const format of ["json", "sse"] as const) {
    backends[format] = await startSdkServer(format === "json");
    servers.push(backends[format].server);
    for (const [who, caller] of [
      ["bob", bob],
      ["alice", alice],
    ] as const) {
      const relay = await startRelay(backends[format].url, caller);
      servers.push(relay.server);
      relays[`${format}:${who}`] = relay;
    }
  }
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

describe.each(["json", "sse"] as const)("the SDK client, answers in %s", (format) => {
  it("is shown only the tools its user may call, page by page, every cursor kept", async () => {
    const relay = relays[`${format}:bob`]!;
    const client = await connect(relay.url);
    try {
      expect(await allTools(client)).toEqual({ names: [["search", "read_page"], [], ["write_page"]], cursors: ["1", "2", undefined] });
      expect(relay.filtered.at(-1)).toMatch(format === "json" ? /^application\/json/ : /^text\/event-stream/);
    } finally {
      await client.close();
    }
  });

  it("a user inside allow is shown the allowed tools, and never the denied ones", async () => {
    const client = await connect(relays[`${format}:alice`]!.url);
    try {
      expect((await allTools(client)).names).toEqual([["search", "delete_page", "read_page"], [], ["write_page", "delete_site"]]);
    } finally {
      await client.close();
    }
  });

  it("a refused call comes back as the SDK's McpError naming the tool, and never reaches the server", async () => {
    const client = await connect(relays[`${format}:bob`]!.url);
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
    const { client } = await connectV2(relays[`${format}:bob`]!.url, "legacy", {});
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
