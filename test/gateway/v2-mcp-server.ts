// A recording MCP server built on the MCP SDK v2 (@modelcontextprotocol/server 2.4): both eras on
// one endpoint, as the SDK documents for a dual-era deployment that keeps 2025 sessions —
// 2026-07-28 requests served statelessly by createMcpHandler (legacy: "reject"), 2025-era traffic
// (initialize, Mcp-Session-Id, GET, DELETE) by a sessionful streamable HTTP transport. Every
// request that reaches it is recorded with its headers and body, so tests can show what the
// broker forwarded, and that it forwarded nothing when it refused.
import { randomUUID } from "node:crypto";
import http, { type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { createMcpHandler, fromJsonSchema, isLegacyRequest, McpServer, WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/server";
import { z } from "zod";

export interface RecordedRequest {
  readonly method: string;
  readonly headers: IncomingHttpHeaders;
  readonly body: string;
}

export interface V2McpServer {
  readonly url: string;
  readonly requests: RecordedRequest[];
  /** Session ids this server issued (2025-era initialize answers). */
  readonly issuedSessions: string[];
  /** Forgets every 2025 session, as a restarted server does. */
  forgetSessions(): void;
  close(): Promise<void>;
}

// An extension keyword the SDK's JSON Schema type does not list: declared as a plain object.
const QUERY_SCHEMA: Parameters<typeof fromJsonSchema>[0] = JSON.parse(
  JSON.stringify({
    type: "object",
    properties: { region: { type: "string", "x-mcp-header": "Region" }, query: { type: "string" } },
    required: ["region", "query"],
  }),
);

/** The tools of both eras: echo, and a query tool whose `region` is mirrored into Mcp-Param-Region. */
function mcpServer(): McpServer {
  const server = new McpServer({ name: "recording-v2", version: "1.0.0" });
  server.registerTool("echo", { description: "Echoes its message", inputSchema: z.object({ message: z.string() }) }, async ({ message }) => ({
    content: [{ type: "text", text: message }],
  }));
  server.registerTool(
    "query",
    {
      description: "Runs a query in a region",
      // streamable-http "Custom Headers from Tool Parameters": the client mirrors `region` into Mcp-Param-Region.
      inputSchema: fromJsonSchema<{ region: string; query: string }>(QUERY_SCHEMA),
    },
    async ({ region, query }) => ({ content: [{ type: "text", text: `${query} in ${region}` }] }),
  );
  return server;
}

async function readBody(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function webRequest(req: http.IncomingMessage, url: string, body: Buffer, signal: AbortSignal): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === "string") headers.set(name, value);
    else if (Array.isArray(value)) for (const v of value) headers.append(name, v);
  }
  return new Request(url, { method: req.method, headers, body: req.method === "POST" ? new Uint8Array(body) : undefined, signal });
}

async function send(res: http.ServerResponse, response: Response): Promise<void> {
  res.writeHead(response.status, Object.fromEntries(response.headers));
  if (!response.body) return void res.end();
  res.flushHeaders();
  const body = Readable.fromWeb(response.body as import("node:stream/web").ReadableStream<Uint8Array>);
  res.once("close", () => body.destroy());
  body.on("error", () => res.destroy());
  body.pipe(res);
}

export interface V2McpServerOptions {
  /** How 2025 session ids are made (default random UUIDs); tests use predictable ones. */
  readonly sessionIds?: () => string;
  /** false: keep no record of requests (the benchmark's server). */
  readonly record?: boolean;
}

export async function startV2McpServer(options: V2McpServerOptions = {}): Promise<V2McpServer> {
  const requests: RecordedRequest[] = [];
  const issuedSessions: string[] = [];
  const sessions = new Map<string, WebStandardStreamableHTTPServerTransport>();
  const modern = createMcpHandler(() => mcpServer(), { legacy: "reject" });

  const legacy = async (request: Request): Promise<Response> => {
    const sessionId = request.headers.get("mcp-session-id");
    if (sessionId !== null) {
      const transport = sessions.get(sessionId);
      if (!transport) return Response.json({ jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null }, { status: 404 });
      return transport.handleRequest(request);
    }
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: options.sessionIds ?? (() => randomUUID()),
      onsessioninitialized: (id) => {
        sessions.set(id, transport);
        issuedSessions.push(id);
      },
      onsessionclosed: (id) => void sessions.delete(id),
    });
    await mcpServer().connect(transport);
    return transport.handleRequest(request);
  };

  const server = http.createServer(async (req, res) => {
    try {
      const body = await readBody(req);
      if (options.record !== false) requests.push({ method: req.method ?? "", headers: req.headers, body: body.toString("utf8") });
      const aborted = new AbortController();
      res.once("close", () => aborted.abort());
      const request = webRequest(req, `http://127.0.0.1${req.url ?? "/"}`, body, aborted.signal);
      const isLegacy = req.method !== "POST" || req.headers["mcp-session-id"] !== undefined || (await isLegacyRequest(request));
      await send(res, await (isLegacy ? legacy(request) : modern.fetch(request)));
    } catch (err) {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(String(err));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    requests,
    issuedSessions,
    forgetSessions: () => sessions.clear(),
    async close() {
      await modern.close();
      await Promise.allSettled([...sessions.values()].map((t) => t.close()));
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
