// Step-up authorization through the broker, with the real MCP TypeScript SDK on both sides.
//
// The MCP server behind the broker guards one tool with a scope: without `docs:write` in
// X-Auth-Scopes it answers `403` with its own `WWW-Authenticate: Bearer error="insufficient_scope",
// scope="docs:write"`, as MCP 2025-11-25 tells servers to
// (https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-challenge-handling).
// The MCP server never sees the client's token and points at nobody the client knows, so the
// broker must answer with its own challenge (its resource_metadata, the scopes it can grant); the
// SDK client then authorizes again for the larger scope, the user sees consent for it (a consent
// remembered for `mcp` alone must not skip that page), and the call goes through.
//
// The SDK client (1.x, client/streamableHttp.js) requests exactly the challenge's scope and, when it
// holds a refresh token, refreshes instead of authorizing again, which can never widen a scope and
// dead-ends in "Server returned 403 after trying upscoping" (modelcontextprotocol/typescript-sdk#2255,
// fixed upstream by SEP-2350's refresh bypass, typescript-sdk#2356). The client here keeps no refresh
// token, as a client that works around that bug does.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer, NoRefreshProvider, connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { mcpPost } from "../support/mcp-probe.ts";

const BACKEND_METADATA = "http://backend.invalid/.well-known/oauth-protected-resource";

/** A small stateless MCP server that reads the caller's scopes from X-Auth-Scopes, as the broker sends them. */
async function startScopedMcpServer() {
  const seenScopes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const scopes = String(req.headers["x-auth-scopes"] ?? "").split(" ");
        const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString()) as { method?: string; params?: { name?: string } }) : undefined;
        if (body?.method === "tools/call" && body.params?.name === "write_doc" && !scopes.includes("docs:write")) {
          res
            .writeHead(403, {
              "content-type": "application/json",
              "www-authenticate": `Bearer error="insufficient_scope", scope="docs:write", resource_metadata="${BACKEND_METADATA}", error_description="Writing needs docs:write"`,
            })
            .end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "forbidden" } }));
          return;
        }
        if (body?.method === "tools/call" && body.params?.name === "backend_401") {
          res
            .writeHead(401, { "content-type": "application/json", "www-authenticate": `Bearer realm="backend", resource_metadata="${BACKEND_METADATA}"` })
            .end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "who are you?" } }));
          return;
        }
        const mcp = new McpServer({ name: "scoped-docs", version: "1.0.0" });
        mcp.registerTool("whoami", { description: "The caller's scopes" }, async () => {
          seenScopes.push(scopes.join(" "));
          return { content: [{ type: "text", text: scopes.join(" ") }] };
        });
        mcp.registerTool("write_doc", { description: "Needs docs:write" }, async () => ({
          content: [{ type: "text", text: `written with ${scopes.join(" ")}` }],
        }));
        mcp.registerTool("backend_401", { description: "Always refused by this server" }, async () => ({ content: [{ type: "text", text: "never" }] }));
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
    seenScopes,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

let backend: Awaited<ReturnType<typeof startScopedMcpServer>>;
let t: TestBroker;
let callback: CallbackServer;
const browser = new HttpBrowser();
/** The consent pages this browser was shown, in order. */
const consentPages: string[] = [];

async function userAuthorizes(url: URL): Promise<void> {
  const answer = answerAs("writer");
  const recording = (at: string, html: string) => {
    if (html.includes('name="csrf"')) consentPages.push(html);
    return answer(at, html);
  };
  await browser.walk(url.href, callback.url, recording).then((landing) => fetch(landing));
}

beforeAll(async () => {
  backend = await startScopedMcpServer();
  t = await startBroker({
    MCP_SERVER_URL: backend.url,
    SCOPES_SUPPORTED: "mcp,docs:read,docs:write",
    SCOPE_DESCRIPTIONS: "docs:read=Read your documents;docs:write=Change and delete your documents",
  });
  callback = await new CallbackServer().start();
});
afterAll(async () => {
  await callback?.close();
  await t?.stop();
  await backend?.close();
});

describe("step-up: the MCP server's 403 insufficient_scope through the broker", () => {
  let connected: ConnectedClient;
  // One client connects with the scope of the first challenge; each test below starts from there
  // (the step-up at the end is the only one that changes it, and runs last).
  beforeAll(async () => {
    const provider = new NoRefreshProvider(callback.url, userAuthorizes, "Docs client");
    connected = await connectWithOAuth(`${t.url}/mcp`, callback, userAuthorizes, provider);
  });
  afterAll(async () => {
    await connected?.client.close();
  });

  it("advertises the configured scopes in both metadata documents", async () => {
    const prm = (await (await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp`)).json()) as { scopes_supported: string[] };
    expect(prm.scopes_supported).toEqual(["mcp", "docs:read", "docs:write"]);
    const as = (await (await fetch(`${t.url}/.well-known/oauth-authorization-server`)).json()) as { scopes_supported: string[] };
    expect(as.scopes_supported).toEqual(["mcp", "docs:read", "docs:write", "offline_access"]);
  });

  it("connects with the scope of the first challenge and the MCP server sees it", async () => {
    expect(consentPages).toHaveLength(1);
    expect(consentPages[0]).toContain("Use the MCP server");
    expect(consentPages[0]).not.toContain("Change and delete your documents");
    const who = await connected.client.callTool({ name: "whoami", arguments: {} });
    expect((who.content as Array<{ text: string }>)[0]!.text).toBe("mcp");
  });

  it("answers the MCP server's 403 with the broker's own challenge, never the server's", async () => {
    const res = await mcpPost(t.url, connected.provider.savedTokens!.access_token, {
      jsonrpc: "2.0",
      id: 7,
      method: "tools/call",
      params: { name: "write_doc", arguments: {} },
    });
    expect(res.status).toBe(403);
    const header = res.headers.get("www-authenticate") ?? "";
    expect(header).toMatch(/^Bearer /);
    expect(header).toContain('error="insufficient_scope"');
    // What the caller holds plus what the server asked for: a 2025-11-25 client asks for exactly this.
    expect(header).toContain('scope="docs:write mcp"');
    expect(header).toContain(`resource_metadata="${t.url}/.well-known/oauth-protected-resource/mcp"`);
    expect(header).not.toContain("backend.invalid");
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("docs:write");
  });

  it("turns the MCP server's 401 into the broker's own 401 challenge", async () => {
    const res = await mcpPost(t.url, connected.provider.savedTokens!.access_token, {
      jsonrpc: "2.0",
      id: 8,
      method: "tools/call",
      params: { name: "backend_401", arguments: {} },
    });
    expect(res.status).toBe(401);
    const header = res.headers.get("www-authenticate") ?? "";
    expect(header).toContain(`resource_metadata="${t.url}/.well-known/oauth-protected-resource/mcp"`);
    expect(header).toContain('error="invalid_token"');
    expect(header).not.toContain("backend");
  });

  it("re-authorizes for the larger scope with a new consent page, then the tool works", async () => {
    let stepUp: unknown;
    try {
      await connected.client.callTool({ name: "write_doc", arguments: {} });
    } catch (err) {
      stepUp = err;
    }
    // The SDK sent the user to /authorize for the larger scope and waits for the code.
    expect(stepUp).toBeInstanceOf(UnauthorizedError);
    const asked = connected.provider.authorizationUrls.at(-1)!;
    expect(asked.searchParams.get("scope")).toBe("docs:write mcp");
    // The consent remembered for `mcp` did not stand in for the new scope.
    expect(consentPages).toHaveLength(2);
    expect(consentPages[1]).toContain("Change and delete your documents");
    const outcome = await callback.next();
    expect(outcome.code).toBeDefined();
    await connected.transport.finishAuth(outcome.code!);
    expect(connected.provider.savedTokens!.scope).toBe("docs:write mcp");
    const written = await connected.client.callTool({ name: "write_doc", arguments: {} });
    expect((written.content as Array<{ text: string }>)[0]!.text).toBe("written with docs:write mcp");
  });
});
