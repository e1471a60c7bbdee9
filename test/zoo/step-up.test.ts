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
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { NoRefreshProvider, callNeedingStepUp, connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { mcpPost } from "../support/mcp-probe.ts";
import { startDocsWorld, type DocsWorld } from "../support/scoped-docs.ts";

const BACKEND_METADATA = "http://backend.invalid/.well-known/oauth-protected-resource";

let world: DocsWorld;

beforeAll(async () => {
  world = await startDocsWorld({
    name: "scoped-docs",
    refuse(tool, scopes) {
      if (tool === "write_doc" && !scopes.includes("docs:write")) {
        return {
          status: 403,
          challenge: `Bearer error="insufficient_scope", scope="docs:write", resource_metadata="${BACKEND_METADATA}", error_description="Writing needs docs:write"`,
          message: "forbidden",
        };
      }
      if (tool === "backend_401") return { status: 401, challenge: `Bearer realm="backend", resource_metadata="${BACKEND_METADATA}"`, message: "who are you?" };
      return undefined;
    },
    tools(mcp, scopes) {
      mcp.registerTool("whoami", { description: "The caller's scopes" }, async () => ({ content: [{ type: "text", text: scopes.join(" ") }] }));
      mcp.registerTool("write_doc", { description: "Needs docs:write" }, async () => ({
        content: [{ type: "text", text: `written with ${scopes.join(" ")}` }],
      }));
      mcp.registerTool("backend_401", { description: "Always refused by this server" }, async () => ({ content: [{ type: "text", text: "never" }] }));
    },
  });
});
afterAll(async () => {
  await world?.stop();
});

describe("step-up: the MCP server's 403 insufficient_scope through the broker", () => {
  let connected: ConnectedClient;
  // One client connects with the scope of the first challenge; each test below starts from there
  // (the step-up at the end is the only one that changes it, and runs last).
  beforeAll(async () => {
    const provider = new NoRefreshProvider(world.callback.url, world.userAuthorizes, "Docs client");
    connected = await connectWithOAuth(`${world.broker.url}/mcp`, world.callback, world.userAuthorizes, provider);
  });
  afterAll(async () => {
    await connected?.client.close();
  });

  /** A tools/call of `tool` with the client's token, straight to the broker: the HTTP answer itself. */
  const callDirectly = (id: number, tool: string) =>
    mcpPost(world.broker.url, connected.provider.savedTokens!.access_token, {
      jsonrpc: "2.0",
      id,
      method: "tools/call",
      params: { name: tool, arguments: {} },
    });

  it("advertises the configured scopes in both metadata documents", async () => {
    const prm = (await (await fetch(`${world.broker.url}/.well-known/oauth-protected-resource/mcp`)).json()) as { scopes_supported: string[] };
    expect(prm.scopes_supported).toEqual(["mcp", "docs:read", "docs:write"]);
    const as = (await (await fetch(`${world.broker.url}/.well-known/oauth-authorization-server`)).json()) as { scopes_supported: string[] };
    expect(as.scopes_supported).toEqual(["mcp", "docs:read", "docs:write", "offline_access"]);
  });

  it("connects with the scope of the first challenge and the MCP server sees it", async () => {
    const { consentPages } = world;
    expect(consentPages).toHaveLength(1);
    expect(consentPages[0]).toContain("Use the MCP server");
    expect(consentPages[0]).not.toContain("Change and delete your documents");
    const who = await connected.client.callTool({ name: "whoami", arguments: {} });
    expect((who.content as Array<{ text: string }>)[0]!.text).toBe("mcp");
  });

  it("answers the MCP server's 403 with the broker's own challenge, never the server's", async () => {
    const res = await callDirectly(7, "write_doc");
    expect(res.status).toBe(403);
    const header = res.headers.get("www-authenticate") ?? "";
    expect(header).toMatch(/^Bearer /);
    expect(header).toContain('error="insufficient_scope"');
    // What the caller holds plus what the server asked for: a 2025-11-25 client asks for exactly this.
    expect(header).toContain('scope="docs:write mcp"');
    expect(header).toContain(`resource_metadata="${world.broker.url}/.well-known/oauth-protected-resource/mcp"`);
    expect(header).not.toContain("backend.invalid");
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain("docs:write");
  });

  it("turns the MCP server's 401 into the broker's own 401 challenge", async () => {
    const res = await callDirectly(8, "backend_401");
    expect(res.status).toBe(401);
    const header = res.headers.get("www-authenticate") ?? "";
    expect(header).toContain(`resource_metadata="${world.broker.url}/.well-known/oauth-protected-resource/mcp"`);
    expect(header).toContain('error="invalid_token"');
    expect(header).not.toContain("backend");
  });

  it("re-authorizes for the larger scope with a new consent page, then the tool works", async () => {
    const { consentPages } = world;
    const stepUp = await callNeedingStepUp(connected, world.callback, "write_doc");
    // The SDK sent the user to /authorize for the larger scope and waited for the code.
    expect(stepUp.thrown).toBeInstanceOf(UnauthorizedError);
    const asked = connected.provider.authorizationUrls.at(-1)!;
    expect(asked.searchParams.get("scope")).toBe("docs:write mcp");
    // The consent remembered for `mcp` did not stand in for the new scope.
    expect(consentPages).toHaveLength(2);
    expect(consentPages[1]).toContain("Change and delete your documents");
    expect(stepUp.code).toBeDefined();
    expect(connected.provider.savedTokens!.scope).toBe("docs:write mcp");
    const written = await connected.client.callTool({ name: "write_doc", arguments: {} });
    expect((written.content as Array<{ text: string }>)[0]!.text).toBe("written with docs:write mcp");
  });
});
