// The quiet MCP server of the benchmark: Streamable HTTP with sessions (initialize gives an
// Mcp-Session-Id, notifications get 202, tools/call echoes, DELETE ends the session), answered as
// application/json, in its own process. Why a second server: the SDK's server keeps each request's
// `Request` (made by @hono/node-server, with an AbortSignal that undici's FinalizationRegistry holds)
// alive until a major GC, about 12 KB a call, so its scavenges take 2–3 ms and land on about one
// call in a hundred, direct or proxied alike: the p99 of both sides is then a draw between those
// pauses. This server keeps nothing per call, so what a proxy adds to one client's tail shows.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomUUID } from "node:crypto";

interface Message {
  readonly id?: string | number;
  readonly method?: string;
  readonly params?: { readonly arguments?: { readonly message?: unknown } };
}

const sessions = new Set<string>();

function parse(body: string): Message | null {
  try {
    const value: unknown = JSON.parse(body);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Message) : null;
  } catch {
    return null;
  }
}

function result(message: Message): object {
  if (message.method === "initialize") {
    return { protocolVersion: "2025-06-18", capabilities: { tools: {} }, serverInfo: { name: "bench-quiet", version: "1.0.0" } };
  }
  if (message.method === "tools/list") return { tools: [{ name: "echo", description: "Returns its message.", inputSchema: { type: "object" } }] };
  const text = message.params?.arguments?.message;
  return { content: [{ type: "text", text: typeof text === "string" ? text : "" }] };
}

/** The answer to one request: its status, its JSON body (none for 202, 204, 405) and its session. */
function reply(req: http.IncomingMessage, body: string): { status: number; json?: object; session?: string } {
  const header = req.headers["mcp-session-id"];
  if (req.method === "DELETE" && typeof header === "string") {
    sessions.delete(header);
    return { status: 204 };
  }
  if (req.method !== "POST") return { status: 405 };
  const message = parse(body);
  if (!message) return { status: 400, json: { jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null } };
  let session = typeof header === "string" ? header : undefined;
  if (message.method === "initialize") {
    session = randomUUID();
    sessions.add(session);
  } else if (session === undefined || !sessions.has(session)) {
    return { status: 404, json: { jsonrpc: "2.0", error: { code: -32001, message: "Session not found" }, id: null } };
  }
  if (message.id === undefined) return { status: 202 };
  return { status: 200, json: { jsonrpc: "2.0", id: message.id, result: result(message) }, session };
}

const server = http.createServer((req, res) => {
  let body = "";
  req.setEncoding("utf8");
  req.on("data", (chunk: string) => {
    body += chunk;
  });
  req.on("end", () => {
    const { status, json, session } = reply(req, body);
    if (json === undefined) {
      res.writeHead(status, status === 405 ? { allow: "POST, DELETE" } : {}).end();
      return;
    }
    res.writeHead(status, { "content-type": "application/json", ...(session ? { "mcp-session-id": session } : {}) });
    res.end(JSON.stringify(json));
  });
});
server.listen(0, "127.0.0.1", () => {
  process.stdout.write(`MCP_URL http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
