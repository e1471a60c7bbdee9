// Test harness for the MCP proxy: the broker's own Koa app (createApp) with the production /mcp
// router (mcpRouter: error format, CORS, mount paths) in front of the proxy; only the caller's
// authentication is stood in for, taken from test headers instead of bearer tokens. Plus SDK
// client, raw SSE and polling helpers.
import { randomBytes } from "node:crypto";
import { tmpdir } from "node:os";
import type Koa from "koa";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { FetchLike } from "@modelcontextprotocol/sdk/shared/transport.js";
import { loadConfig } from "../../src/config/load.ts";
import { createLogger } from "../../src/logger.ts";
import { createApp } from "../../src/app.ts";
import { listen } from "../../src/http/server.ts";
import { mcpRouter } from "../../src/gateway/router.ts";
import { createMcpProxy, type McpProxyOptions } from "../../src/gateway/proxy.ts";
import { createMemorySessionBinding, type McpSessionBinding } from "../../src/gateway/session-binding.ts";
import type { CallerIdentity } from "../../src/grants/caller-identity.ts";

/** `x-test-user: alice` → user `test:alice`; no header → a client_credentials caller (no subject). */
export function testIdentity(ctx: Koa.Context): CallerIdentity {
  const user = ctx.get("x-test-user");
  const clientId = ctx.get("x-test-client") || "test-client";
  if (!user) return { subject: null, user: null, clientId, scopes: ["mcp"], grantId: `grant-${clientId}`, facts: { subject: `client:${clientId}` } };
  return {
    subject: `test:${user}`,
    user,
    clientId,
    scopes: ["mcp", "profile"],
    grantId: `grant-${user}`,
    facts: { subject: `test:${user}`, login: user },
    upstreamAccessToken: `upstream-token-of-${user}`,
  };
}

export interface TestGateway {
  /** The proxied endpoint, http://127.0.0.1:port/mcp */
  readonly url: string;
  readonly binding: McpSessionBinding;
  close(): Promise<void>;
}

export async function startGateway(options: Partial<Omit<McpProxyOptions, "logger" | "sessionBinding">> & { targetUrl: string }): Promise<TestGateway> {
  const config = loadConfig(
    {
      HOST: "127.0.0.1",
      PUBLIC_URL: options.publicUrl ?? "http://127.0.0.1",
      SECRET_KEY: randomBytes(32).toString("base64"),
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
    },
    tmpdir(),
  );
  const logger = createLogger(config.logLevel);
  const binding = createMemorySessionBinding();
  const proxy = createMcpProxy({
    timeoutMs: 10_000,
    forwardUpstreamToken: false,
    ...options,
    logger,
    sessionBinding: binding,
  });
  const authenticate: Koa.Middleware = async (ctx, next) => {
    ctx.state.identity = testIdentity(ctx);
    await next();
  };
  const app = createApp({ config, logger, routers: [mcpRouter({ authenticate, handler: proxy.middleware, mountPaths: options.mountPaths ?? ["/mcp"] })] });
  const server = await listen(app.callback(), 0, "127.0.0.1");
  return {
    url: `http://127.0.0.1:${server.port}/mcp`,
    binding,
    async close() {
      await proxy.close();
      await server.close(1000);
    },
  };
}

export interface ConnectedClient {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  /** Resolves when the SDK's standalone GET stream has its response headers. */
  readonly standaloneStreamOpen: Promise<void>;
}

/** The real MCP SDK client through the gateway; `headers` are sent on every request. */
export async function connectClient(url: string, headers: Record<string, string>, options: { standaloneStream?: boolean } = {}): Promise<ConnectedClient> {
  let opened!: () => void;
  const standaloneStreamOpen = new Promise<void>((resolve) => (opened = resolve));
  const observingFetch: FetchLike = async (input, init) => {
    // Tests that open the GET stream themselves refuse the SDK's own one (405 = "no stream").
    if (init?.method === "GET" && options.standaloneStream === false) return new Response(null, { status: 405 });
    const response = await fetch(input, init);
    if (init?.method === "GET" && response.ok) opened();
    return response;
  };
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers },
    fetch: observingFetch,
    reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 },
  });
  const client = new Client({ name: "gateway-test", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport, standaloneStreamOpen };
}

export function toolText(result: unknown): string {
  const content = (result as { content?: Array<{ type: string; text?: string }> }).content ?? [];
  return content.map((c) => c.text ?? "").join("");
}

export interface SseEvent {
  readonly id?: string;
  readonly event?: string;
  readonly data: string;
}

/** Reads an SSE body event by event (comments and keep-alives skipped). */
export async function* sseEvents(body: ReadableStream<Uint8Array> | null): AsyncGenerator<SseEvent> {
  if (!body) return;
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true }).replace(/\r\n?/g, "\n");
    for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const fields: { id?: string; event?: string; data: string[] } = { data: [] };
      for (const line of block.split("\n")) {
        const colon = line.indexOf(":");
        if (colon === 0) continue;
        const name = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "data") fields.data.push(value);
        else if (name === "id") fields.id = value;
        else if (name === "event") fields.event = value;
      }
      if (fields.data.length === 0 && fields.id === undefined) continue;
      yield {
        ...(fields.id !== undefined ? { id: fields.id } : {}),
        ...(fields.event !== undefined ? { event: fields.event } : {}),
        data: fields.data.join("\n"),
      };
    }
  }
}

/** Headers of a raw MCP request within an existing session. */
export function sessionHeaders(transport: StreamableHTTPClientTransport, extra: Record<string, string> = {}): Record<string, string> {
  return {
    "mcp-session-id": transport.sessionId ?? "",
    "mcp-protocol-version": transport.protocolVersion ?? "",
    ...extra,
  };
}
