// Scope hierarchies with the real MCP TypeScript SDK on both sides (MCP 2026-07-28: servers "MUST
// account for scope hierarchies, where a broader scope implies narrower ones"). The operator says
// SCOPE_IMPLIES=docs:write=docs:read; the MCP server behind the broker knows nothing of it and
// checks X-Auth-Scopes literally: docs:read for read_doc, docs:write for write_doc, answering 403
// insufficient_scope otherwise. After one step-up to docs:write the client reads without a second
// authorization, because the grant carries what docs:write implies.
//
// The client keeps no refresh token, for the reason test/zoo/step-up.test.ts gives (the SDK 1.x
// refreshes instead of re-authorizing on a 403, which can never widen a scope).
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { NoRefreshProvider, callNeedingStepUp, connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { startDocsWorld, type DocsWorld } from "../support/scoped-docs.ts";

const NEEDS: Record<string, string> = { read_doc: "docs:read", write_doc: "docs:write" };

let world: DocsWorld;

beforeAll(async () => {
  // A server that guards each tool with one scope, read literally from X-Auth-Scopes.
  world = await startDocsWorld(
    {
      name: "guarded-docs",
      refuse(tool, scopes) {
        const needed = NEEDS[tool];
        if (!needed || scopes.includes(needed)) return undefined;
        return { status: 403, challenge: `Bearer error="insufficient_scope", scope="${needed}"`, message: "forbidden" };
      },
      tools(mcp, scopes) {
        for (const [name, scope] of Object.entries(NEEDS)) {
          mcp.registerTool(name, { description: `Needs ${scope}` }, async () => ({ content: [{ type: "text", text: `${name} with ${scopes.join(" ")}` }] }));
        }
      },
    },
    { SCOPE_IMPLIES: "docs:write=docs:read" },
  );
});
afterAll(async () => {
  await world?.stop();
});

it("after one step-up to docs:write, a tool that needs docs:read works without another authorization", async () => {
  const { broker, callback, consentPages, userAuthorizes } = world;
  const provider = new NoRefreshProvider(callback.url, userAuthorizes, "Docs client");
  const connected = await connectWithOAuth(`${broker.url}/mcp`, callback, userAuthorizes, provider);
  try {
    expect(consentPages).toHaveLength(1);

    const stepUp = await callNeedingStepUp(connected, callback, "write_doc");
    expect(stepUp.thrown).toBeInstanceOf(UnauthorizedError);
    expect(provider.authorizationUrls.at(-1)!.searchParams.get("scope")).toBe("docs:write mcp");
    // The consent page says what comes with docs:write.
    expect(consentPages).toHaveLength(2);
    expect(consentPages[1]).toContain("Change and delete your documents");
    expect(consentPages[1]).toContain("Read your documents");
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
