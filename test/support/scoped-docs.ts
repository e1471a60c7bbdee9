// A documents MCP server that guards its tools by scope, behind a broker that offers docs:read and
// docs:write, with a user at a browser: what the step-up tests drive the real SDK client through.
// The MCP server (the SDK's own, stateless: one server per request) knows nothing of the broker's
// scopes but what X-Auth-Scopes says; a tool call it refuses gets its own status and
// WWW-Authenticate before the SDK server sees it, as a server answering 403 insufficient_scope does.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { startBroker, type TestBroker } from "./start-broker.ts";
import { CallbackServer } from "./mcp-oauth-client.ts";
import { HttpBrowser, answerRecordingConsent } from "./http-browser.ts";

/** The MCP server's own refusal of a tool call. */
export interface Refusal {
  readonly status: 401 | 403;
  readonly challenge: string;
  /** The JSON-RPC error message of the body. */
  readonly message: string;
}

export interface DocsServerOptions {
  readonly name: string;
  /** The refusal of a call of `tool` by a caller holding `scopes`, or undefined to serve it. */
  refuse(tool: string, scopes: readonly string[]): Refusal | undefined;
  /** Registers the tools on the server made for one request, which knows the caller's scopes. */
  tools(mcp: McpServer, scopes: readonly string[]): void;
}

export interface DocsServer {
  readonly url: string;
  close(): Promise<void>;
}

export async function startDocsServer(options: DocsServerOptions): Promise<DocsServer> {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const scopes = String(req.headers["x-auth-scopes"] ?? "").split(" ");
        const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString()) as { method?: string; params?: { name?: string } }) : undefined;
        const refusal = body?.method === "tools/call" ? options.refuse(body.params?.name ?? "", scopes) : undefined;
        if (refusal) {
          res
            .writeHead(refusal.status, { "content-type": "application/json", "www-authenticate": refusal.challenge })
            .end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: refusal.message } }));
          return;
        }
        const mcp = new McpServer({ name: options.name, version: "1.0.0" });
        options.tools(mcp, scopes);
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
        res.on("close", () => void transport.close());
        await mcp.connect(transport);
        await transport.handleRequest(req, res, body);
      })().catch((err: unknown) => res.writeHead(500).end(String(err)));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

export interface DocsWorld {
  readonly backend: DocsServer;
  readonly broker: TestBroker;
  /** The SDK client's redirect URI. */
  readonly callback: CallbackServer;
  /** The consent pages the user's browser was shown, in order. */
  readonly consentPages: string[];
  /** The user "writer" in one browser: signs in upstream, allows, and lands on the callback. */
  userAuthorizes(url: URL): Promise<void>;
  stop(): Promise<void>;
}

/** The documents server behind a broker that offers and describes docs:read and docs:write (`env` added). */
export async function startDocsWorld(server: DocsServerOptions, env: Record<string, string> = {}): Promise<DocsWorld> {
  const backend = await startDocsServer(server);
  const broker = await startBroker({
    MCP_SERVER_URL: backend.url,
    SCOPES_SUPPORTED: "mcp,docs:read,docs:write",
    SCOPE_DESCRIPTIONS: "docs:read=Read your documents;docs:write=Change and delete your documents",
    ...env,
  });
  const callback = await new CallbackServer().start();
  const browser = new HttpBrowser();
  const consentPages: string[] = [];
  return {
    backend,
    broker,
    callback,
    consentPages,
    async userAuthorizes(url) {
      const landing = await browser.walk(url.href, callback.url, answerRecordingConsent("writer", consentPages));
      await fetch(landing);
    },
    async stop() {
      await callback.close();
      await broker.stop();
      await backend.close();
    },
  };
}
