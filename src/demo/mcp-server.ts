// The demo MCP server: the real MCP TypeScript SDK over Streamable HTTP on plain node:http, with
// stateful sessions and resumable streams. Its tools show what the broker tells a protected MCP
// server (whoami) and exercise streaming (countdown's progress, notify's server-initiated message).
import http, { type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from "jose";
import { InMemoryEventStore } from "./event-store.ts";

export interface RecordedRequest {
  readonly method: string;
  /** Path and query as received. */
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** The connection closed before the response was complete (the caller went away). */
  closedEarly: boolean;
}

export interface DemoMcpServerOptions {
  readonly port?: number;
  readonly host?: string;
  /**
   * Awaited before each countdown step (remaining = from … 1) and before its result
   * (remaining = 0): lets tests prove that each event is delivered before the next is produced.
   */
  readonly beforeCountdownStep?: (step: { remaining: number }) => Promise<void> | void;
  /** Where whoami verifies X-Auth-Assertion: the broker's JWKS, its issuer and this server's resource. */
  readonly assertion?: AssertionCheck;
}

export interface AssertionCheck {
  readonly jwksUrl: string;
  readonly issuer: string;
  readonly audience: string;
}

export interface DemoMcpServer {
  /** The MCP endpoint, http://host:port/mcp. */
  readonly url: string;
  /** The latest requests received (bounded), for tests and for looking at what arrives. */
  readonly requests: RecordedRequest[];
  close(): Promise<void>;
}

const MCP_PATH = "/mcp";
const MAX_RECORDED = 1000;
/** Above the SDK's 4 MiB default, so large tool arguments can be shown to stream through. */
const MAX_BODY_BYTES = 16 * 1024 * 1024;

function header(headers: Record<string, string | string[] | undefined> | undefined, name: string): string | null {
  const value = headers?.[name];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(", ") : value;
}

function text(value: string) {
  return { content: [{ type: "text" as const, text: value }] };
}

/**
 * What a server behind the broker should do with X-Auth-Assertion (the README's five lines): verify
 * it against the broker's published keys before believing any X-Auth-* header.
 */
async function verifiedAssertion(value: string | null, check: AssertionCheck | undefined, keys: () => JWTVerifyGetKey) {
  if (!check) return null;
  if (value === null) return { verified: false, reason: "no X-Auth-Assertion was received" };
  try {
    const { payload } = await jwtVerify(value, keys(), { issuer: check.issuer, audience: check.audience, algorithms: ["ES256"] });
    return { verified: true, sub: payload.sub, login: payload.login ?? null, clientId: payload.client_id ?? null };
  } catch (err) {
    return { verified: false, reason: err instanceof Error ? err.message : String(err) };
  }
}

/** whoami: what the broker forwarded, and raw values tests check the broker never lets through. */
function registerWhoami(server: McpServer, check: AssertionCheck | undefined): void {
  // One key set per server: jose caches the fetched keys and refetches on an unknown kid.
  let keySet: JWTVerifyGetKey | undefined;
  const keys = () => {
    keySet ??= createRemoteJWKSet(new URL(check!.jwksUrl));
    return keySet;
  };
  server.registerTool(
    "whoami",
    { description: "Shows the identity the broker forwarded (X-Auth-* headers) and which credentials reached this server." },
    async (extra) => {
      const headers = extra.requestInfo?.headers;
      return text(
        JSON.stringify({
          subject: header(headers, "x-auth-subject"),
          user: header(headers, "x-auth-user"),
          clientId: header(headers, "x-auth-client-id"),
          scopes: header(headers, "x-auth-scopes"),
          assertion: await verifiedAssertion(header(headers, "x-auth-assertion"), check, keys),
          upstreamAccessTokenPresent: header(headers, "x-upstream-access-token") !== null,
          // Raw values so tests can assert the broker never lets them through.
          authorization: header(headers, "authorization"),
          cookie: header(headers, "cookie"),
          forwardedFor: header(headers, "x-forwarded-for"),
          forwardedProto: header(headers, "x-forwarded-proto"),
          forwardedHost: header(headers, "x-forwarded-host"),
          forwarded: header(headers, "forwarded"),
        }),
      );
    },
  );
}

/** countdown: a long call with one progress notification per step. */
function registerCountdown(server: McpServer, options: DemoMcpServerOptions): void {
  server.registerTool(
    "countdown",
    {
      description: "Counts down, sending one progress notification per step, then returns 'liftoff'.",
      inputSchema: {
        from: z.number().int().min(0).max(1000).default(3),
        intervalMs: z.number().int().min(0).max(60_000).default(100),
      },
    },
    async ({ from, intervalMs }, extra) => {
      const progressToken = extra._meta?.progressToken;
      for (let remaining = from; remaining > 0; remaining--) {
        await options.beforeCountdownStep?.({ remaining });
        if (progressToken !== undefined) {
          await extra.sendNotification({
            method: "notifications/progress",
            params: { progressToken, progress: from - remaining + 1, total: from, message: String(remaining) },
          });
        }
        if (remaining > 1 && intervalMs > 0) await sleep(intervalMs, undefined, { signal: extra.signal });
      }
      await options.beforeCountdownStep?.({ remaining: 0 });
      return text("liftoff");
    },
  );
}

function createDemoServer(options: DemoMcpServerOptions): McpServer {
  const server = new McpServer({ name: "mcp-auth-broker-demo", version: "1.0.0" }, { capabilities: { logging: {} } });
  registerWhoami(server, options.assertion);
  server.registerTool("echo", { description: "Returns its message.", inputSchema: { message: z.string() } }, async ({ message }) => text(message));
  registerCountdown(server, options);
  server.registerTool(
    "notify",
    {
      description: "Sends a logging notification on the session's standalone (GET) stream.",
      inputSchema: { message: z.string().default("hello from the MCP server") },
    },
    async ({ message }, extra) => {
      await server.sendLoggingMessage({ level: "info", logger: "demo", data: message }, extra.sessionId);
      return text("sent");
    },
  );
  return server;
}

function sendJsonRpcError(res: http.ServerResponse, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code, message }, id: null }));
}

type Sessions = Map<string, StreamableHTTPServerTransport>;

/** An initialize request: a new server and transport, kept under the session id the SDK makes. */
async function openSession(sessions: Sessions, options: DemoMcpServerOptions, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    eventStore: new InMemoryEventStore(),
    maxRequestBodySize: MAX_BODY_BYTES,
    onsessioninitialized: (id) => {
      sessions.set(id, transport);
    },
  });
  transport.onclose = () => {
    if (transport.sessionId !== undefined) sessions.delete(transport.sessionId);
  };
  const server = createDemoServer(options);
  await server.connect(transport);
  await transport.handleRequest(req, res);
  // Not an initialize request (the SDK answered 400): there is no session to keep.
  if (transport.sessionId === undefined) await server.close();
}

/** A request recorded (for tests to look at), then answered by its session, a new one, or an error. */
async function handle(
  state: { readonly sessions: Sessions; readonly requests: RecordedRequest[]; readonly options: DemoMcpServerOptions },
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  const { sessions, requests } = state;
  const record: RecordedRequest = { method: req.method ?? "", url: req.url ?? "", headers: { ...req.headers }, closedEarly: false };
  requests.push(record);
  if (requests.length > MAX_RECORDED) requests.shift();
  res.on("close", () => {
    if (!res.writableFinished) record.closedEarly = true;
  });

  if (new URL(record.url, "http://localhost").pathname !== MCP_PATH) {
    return sendJsonRpcError(res, 404, -32601, `No MCP endpoint at ${record.url}; use ${MCP_PATH}.`);
  }
  if (!["GET", "POST", "DELETE"].includes(record.method)) {
    return sendJsonRpcError(res, 405, -32000, "Method not allowed.", { Allow: "GET, POST, DELETE" });
  }
  const sessionId = req.headers["mcp-session-id"];
  if (typeof sessionId === "string") {
    const transport = sessions.get(sessionId);
    if (!transport) return sendJsonRpcError(res, 404, -32001, "Session not found");
    return transport.handleRequest(req, res);
  }
  if (record.method !== "POST") return sendJsonRpcError(res, 400, -32000, "Bad Request: Mcp-Session-Id header is required");
  return openSession(sessions, state.options, req, res);
}

export async function startDemoMcpServer(options: DemoMcpServerOptions = {}): Promise<DemoMcpServer> {
  const state = { sessions: new Map() as Sessions, requests: [] as RecordedRequest[], options };
  const { sessions } = state;
  const httpServer = http.createServer((req, res) => {
    handle(state, req, res).catch(() => {
      if (!res.headersSent) sendJsonRpcError(res, 500, -32603, "Internal error");
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    httpServer.once("error", reject);
    httpServer.listen(options.port ?? 0, options.host ?? "127.0.0.1", () => {
      httpServer.off("error", reject);
      resolve();
    });
  });
  const address = httpServer.address() as AddressInfo;
  const host = address.family === "IPv6" ? `[${address.address}]` : address.address;

  return {
    url: `http://${host}:${address.port}${MCP_PATH}`,
    requests: state.requests,
    async close() {
      await Promise.allSettled([...sessions.values()].map((t) => t.close()));
      sessions.clear();
      const closed = new Promise<void>((resolve) => httpServer.close(() => resolve()));
      httpServer.closeAllConnections();
      await closed;
    },
  };
}
