// Claude Code, replayed: the requests it sends to connect to an MCP server, as its issues show them.
//
// - client_id is its Client ID Metadata Document, https://claude.ai/oauth/claude-code-client-metadata,
//   whose redirect_uris are port-less loopback URIs, while the authorization request carries an
//   ephemeral port (anthropics/claude-code#42301, #37767, #41011 quote the document and the
//   requests: `redirect_uri=http://localhost:58135/callback`).
// - resource is the MCP URL exactly as the user configured it, query string included
//   (anthropics/claude-code#90370).
// - token_endpoint_auth_method none, PKCE S256, the same redirect_uri and resource at /token.
//
// The document is served over https by the test with a throwaway CA and the name claude.ai answered
// by the test's own DNS lookup (nothing leaves the machine). The one difference from the real
// client: the document server cannot take port 443 here, so the client_id carries the test server's
// port (`https://claude.ai:<port>/oauth/claude-code-client-metadata`); the path and the document are
// Claude Code's.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startDocumentServer, type DocumentServer } from "../support/document-server.ts";
import { authorize, tokenRequest } from "../support/oauth-flow.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { initializeAs, mcpPostTo } from "../support/mcp-probe.ts";

describe("Claude Code (CIMD client_id, ephemeral loopback port, resource with a query)", () => {
  let docs: DocumentServer;
  let broker: TestBroker;
  let clientId: string;

  beforeAll(async () => {
    docs = await startDocumentServer(["claude.ai"]);
    clientId = `https://claude.ai:${docs.port}/oauth/claude-code-client-metadata`;
    // The document as anthropics/claude-code#41011 and #42301 quote it (no application_type, no port).
    docs.json(
      "/oauth/claude-code-client-metadata",
      {
        client_id: clientId,
        client_name: "Claude Code",
        client_uri: "https://claude.ai",
        redirect_uris: ["http://localhost/callback", "http://127.0.0.1/callback"],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: "none",
      },
      { "cache-control": "public, max-age=3600" },
    );
    broker = await startBroker(
      { CIMD_ALLOW_PRIVATE_NETWORKS: "true", CIMD_TRUSTED_HOSTS: "claude.ai" },
      { documentFetch: { lookup: docs.lookup({ "claude.ai": "127.0.0.1" }), ca: docs.caCert } },
    );
  });
  afterAll(async () => {
    await broker?.stop();
    await docs?.close();
  });

  it("discovers CIMD support, authorizes on an ephemeral port, gets tokens and reaches /mcp", async () => {
    // 1. The 401 and discovery, as the SDK-based client does it.
    const challenge = await fetch(`${broker.url}/mcp?tenant=acme`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(challenge.status).toBe(401);
    const as = (await (await fetch(`${broker.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, unknown>;
    expect(as.client_id_metadata_document_supported).toBe(true);
    expect(as.token_endpoint_auth_methods_supported).toContain("none");

    // 2. /authorize with the metadata URL as client_id, a random loopback port, the MCP URL with its query.
    const redirectUri = "http://localhost:58135/callback";
    const resource = `${broker.url}/mcp?tenant=acme`;
    const { callback, verifier, state } = await authorize(broker.url, { client_id: clientId, redirect_uri: redirectUri }, { user: "alice", resource });
    expect(callback.origin + callback.pathname).toBe(redirectUri);
    expect(callback.searchParams.get("state")).toBe(state);
    expect(callback.searchParams.get("iss")).toBe(broker.url);
    const code = callback.searchParams.get("code");
    expect(code).toBeTruthy();

    // 3. /token: public client, PKCE, the same redirect_uri and resource.
    const token = await tokenRequest(broker.url, {
      grant_type: "authorization_code",
      code: code!,
      code_verifier: verifier,
      redirect_uri: redirectUri,
      client_id: clientId,
      resource,
    });
    expect(token.status).toBe(200);
    expect(token.body.token_type).toBe("Bearer");
    expect(token.body.refresh_token).toBeTruthy();

    // 4. The MCP endpoint takes the token.
    const mcp = await mcpPostTo(
      `${broker.url}/mcp?tenant=acme`,
      token.body.access_token as string,
      initializeAs({ name: "claude-code", version: "2.1.0" }, "2025-11-25"),
    );
    expect(mcp.status).toBe(200);

    // 5. Refresh, as it does when the access token expires.
    const refreshed = await tokenRequest(broker.url, {
      grant_type: "refresh_token",
      refresh_token: token.body.refresh_token as string,
      client_id: clientId,
      resource,
    });
    expect(refreshed.status).toBe(200);
  });

  it("the consent page names claude.ai as who vouches for it, verified by CIMD_TRUSTED_HOSTS", async () => {
    const url = new URL(`${broker.url}/authorize`);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: clientId,
      redirect_uri: "http://127.0.0.1:61001/callback",
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      state: "s",
    }))
      url.searchParams.set(k, v);
    const { HttpBrowser } = await import("../support/http-browser.ts");
    const browser = new HttpBrowser();
    const first = await browser.request(url.href);
    expect(first.status).toBe(302);
    const page = await (await browser.request(new URL(first.headers.get("location")!, url).href)).text();
    expect(page).toContain('<span id="client-name">Claude Code</span>');
    expect(page).toContain(`id="document-host">claude.ai:${docs.port}<`);
    expect(page).toContain('id="verified"');
  });
});
