// Scope hierarchies with the real MCP TypeScript SDK on both sides (MCP 2026-07-28: servers "MUST
// account for scope hierarchies, where a broader scope implies narrower ones"). The operator says
// SCOPE_IMPLIES=docs:write=docs:read; the MCP server behind the broker knows nothing of it and
// checks X-Auth-Scopes literally: docs:read for read_doc, docs:write for write_doc, answering 403
// insufficient_scope otherwise. After one step-up to docs:write the client reads without a second
// authorization, because the grant carries what docs:write implies.
//
// The client keeps no refresh token, for the reason test/zoo/step-up.test.ts gives (the SDK 1.x
// refreshes instead of re-authorizing on a 403, which can never widen a scope).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer, TestOAuthProvider, connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";

const NEEDS: Record<string, string> = { read_doc: "docs:read", write_doc: "docs:write" };

/** A stateless MCP server that guards each tool with one scope, read literally from X-Auth-Scopes. */
async function startGuardedMcpServer() {
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      void (async () => {
        const scopes = String(req.headers["x-auth-scopes"] ?? "").split(" ");
        const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString()) as { method?: string; params?: { name?: string } }) : undefined;
        const needed = body?.method === "tools/call" ? NEEDS[body.params?.name ?? ""] : undefined;
        if (needed && !scopes.includes(needed)) {
          res
            .writeHead(403, { "content-type": "application/json", "www-authenticate": `Bearer error="insufficient_scope", scope="${needed}"` })
            .end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "forbidden" } }));
          return;
        }
        const mcp = new McpServer({ name: "guarded-docs", version: "1.0.0" });
        for (const [name, scope] of Object.entries(NEEDS)) {
          mcp.registerTool(name, { description: `Needs ${scope}` }, async () => ({ content: [{ type: "text", text: `${name} with ${scopes.join(" ")}` }] }));
        }
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

class NoRefreshProvider extends TestOAuthProvider {
  override saveTokens(tokens: OAuthTokens) {
    const { refresh_token: _dropped, ...rest } = tokens;
    super.saveTokens(rest);
  }
}

let backend: Awaited<ReturnType<typeof startGuardedMcpServer>>;
let t: TestBroker;
let callback: CallbackServer;

beforeAll(async () => {
  backend = await startGuardedMcpServer();
  t = await startBroker({
    MCP_SERVER_URL: backend.url,
    SCOPES_SUPPORTED: "mcp,docs:read,docs:write",
    SCOPE_DESCRIPTIONS: "docs:read=Read your documents;docs:write=Change and delete your documents",
    SCOPE_IMPLIES: "docs:write=docs:read",
  });
  callback = await new CallbackServer().start();
});
afterAll(async () => {
  await callback?.close();
  await t?.stop();
  await backend?.close();
});

it("after one step-up to docs:write, a tool that needs docs:read works without another authorization", async () => {
  const browser = new HttpBrowser();
  const consentPages: string[] = [];
  const userAuthorizes = async (url: URL) => {
    const answer = answerAs("writer");
    const recording = (at: string, html: string) => {
      if (html.includes('name="csrf"')) consentPages.push(html);
      return answer(at, html);
    };
    await browser.walk(url.href, callback.url, recording).then((landing) => fetch(landing));
  };
  const provider = new NoRefreshProvider(callback.url, userAuthorizes, "Docs client");
  const connected = await connectWithOAuth(`${t.url}/mcp`, callback, userAuthorizes, provider);
  try {
    expect(consentPages).toHaveLength(1);

    let stepUp: unknown;
    try {
      await connected.client.callTool({ name: "write_doc", arguments: {} });
    } catch (err) {
      stepUp = err;
    }
    expect(stepUp).toBeInstanceOf(UnauthorizedError);
    expect(provider.authorizationUrls.at(-1)!.searchParams.get("scope")).toBe("docs:write mcp");
    // The consent page says what comes with docs:write.
    expect(consentPages).toHaveLength(2);
    expect(consentPages[1]).toContain("Change and delete your documents");
    expect(consentPages[1]).toContain("Read your documents");
    const outcome = await callback.next();
    await connected.transport.finishAuth(outcome.code!);
    expect(provider.savedTokens!.scope).toBe("docs:read docs:write mcp");
    const written = await connected.client.callTool({ name: "write_doc", arguments: {} });
    expect((written.content as Array<{ text: string }>)[0]!.text).toBe("write_doc with docs:read docs:write mcp");

    const authorizations = provider.authorizationUrls.length;
    const read = await connected.client.callTool({ name: "read_doc", arguments: {} });
    expect((read.content as Array<{ text: string }>)[0]!.text).toBe("read_doc with docs:read docs:write mcp");
    expect(provider.authorizationUrls).toHaveLength(authorizations);
    expect(consentPages).toHaveLength(2);
  } finally {
    await connected.client.close();
  }
}, 60_000);
