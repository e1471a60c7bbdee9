// A browser-based MCP client (as the MCP Inspector is) on another origin: Chromium enforces CORS
// for real, so every call it makes — the 401 challenge, discovery, registration, the token
// request, MCP with a bearer token and a session, revocation — must pass preflights and expose
// the headers the client needs (WWW-Authenticate, Mcp-Session-Id).
import { expect, it } from "@jest/globals";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { Page } from "playwright-core";
import { describeWithChromium, newUser, useChromium } from "../support/browser.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, publicClientMetadata } from "../support/oauth-flow.ts";
import { initializeAs } from "../support/mcp-probe.ts";

const chromium = useChromium();

describeWithChromium("a browser-based MCP client on another origin", () => {
  let broker: TestBroker;
  let appOrigin: string;
  let page: Page;

  it("discovers, registers, gets tokens and uses /mcp through real CORS", async () => {
    broker = await startBroker();
    chromium.cleanup(() => broker.stop());
    // The client application's own origin: a blank page, and its redirect URI.
    const app = http.createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>client</title>"));
    await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve));
    chromium.cleanup(
      () =>
        new Promise((resolve) => {
          app.closeAllConnections();
          app.close(resolve);
        }),
    );
    appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`;
    const context = await newUser(chromium.browser);
    page = await context.newPage();
    await page.goto(`${appOrigin}/`);
    const corsErrors: string[] = [];
    page.on("console", (m) => m.type() === "error" && corsErrors.push(m.text()));

    // 1. The 401 and what it points at, read by script (WWW-Authenticate must be exposed).
    const discovered = await page.evaluate(
      async ({ mcpUrl, metadata }) => {
        const res = await fetch(mcpUrl, {
          method: "POST",
          headers: { "content-type": "application/json", accept: "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18" },
          body: "{}",
        });
        const challenge = res.headers.get("www-authenticate") ?? "";
        const resourceMetadata = /resource_metadata="([^"]+)"/.exec(challenge)?.[1] ?? "";
        const prm = (await (await fetch(resourceMetadata, { headers: { "mcp-protocol-version": "2025-06-18" } })).json()) as {
          authorization_servers: string[];
        };
        const issuer = prm.authorization_servers[0]!;
        const as = (await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, string>;
        const registration = await fetch(as.registration_endpoint!, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(metadata),
        });
        return {
          status: res.status,
          challenge,
          resourceMetadata,
          issuer,
          tokenEndpoint: as.token_endpoint!,
          revocationEndpoint: as.revocation_endpoint!,
          registrationStatus: registration.status,
          client: (await registration.json()) as { client_id: string },
        };
      },
      { mcpUrl: `${broker.url}/mcp`, metadata: publicClientMetadata(`${appOrigin}/callback`, "Browser client") },
    );
    expect(discovered.status).toBe(401);
    expect(discovered.resourceMetadata).toBe(`${broker.url}/.well-known/oauth-protected-resource/mcp`);
    expect(discovered.issuer).toBe(broker.url);
    expect(discovered.registrationStatus).toBe(201);

    // 2. The user's part (consent, login) happens in a window of its own; here, over HTTP.
    const { callback, verifier } = await authorize(broker.url, { client_id: discovered.client.client_id, redirect_uri: `${appOrigin}/callback` });
    const code = callback.searchParams.get("code")!;

    // 3. Token request, then MCP with a bearer token (a preflighted request), a session, and revocation.
    const used = await page.evaluate(
      async ({ tokenEndpoint, revocationEndpoint, mcpUrl, clientId, code, verifier, redirectUri, resource, initialize }) => {
        const tokenRes = await fetch(tokenEndpoint, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({
            grant_type: "authorization_code",
            code,
            code_verifier: verifier,
            redirect_uri: redirectUri,
            client_id: clientId,
            resource,
          }),
        });
        const tokens = (await tokenRes.json()) as { access_token: string };
        const headers = {
          authorization: `Bearer ${tokens.access_token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-protocol-version": "2025-06-18",
        };
        const init = await fetch(mcpUrl, {
          method: "POST",
          headers,
          body: JSON.stringify(initialize),
        });
        const session = init.headers.get("mcp-session-id");
        await init.text();
        const call = await fetch(mcpUrl, {
          method: "POST",
          headers: { ...headers, "mcp-session-id": session ?? "" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "whoami", arguments: {} } }),
        });
        const revoke = await fetch(revocationEndpoint, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ token: tokens.access_token, client_id: clientId }),
        });
        const after = await fetch(mcpUrl, {
          method: "POST",
          headers: { ...headers, "mcp-session-id": session ?? "" },
          body: JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/list" }),
        });
        return {
          tokenStatus: tokenRes.status,
          initStatus: init.status,
          session,
          callStatus: call.status,
          callBody: await call.text(),
          revokeStatus: revoke.status,
          afterStatus: after.status,
          afterChallenge: after.headers.get("www-authenticate"),
        };
      },
      {
        tokenEndpoint: discovered.tokenEndpoint,
        revocationEndpoint: discovered.revocationEndpoint,
        mcpUrl: `${broker.url}/mcp`,
        clientId: discovered.client.client_id,
        code,
        verifier,
        redirectUri: `${appOrigin}/callback`,
        resource: `${broker.url}/mcp`,
        initialize: initializeAs({ name: "browser", version: "1" }),
      },
    );
    expect(used).toMatchObject({ tokenStatus: 200, initStatus: 200, callStatus: 200, revokeStatus: 200, afterStatus: 401 });
    expect(used.session).toMatch(/.+/);
    expect(used.callBody).toContain("demo:alice");
    expect(used.afterChallenge).toContain('error="invalid_token"');
    expect(corsErrors.filter((e) => /CORS|Access-Control/i.test(e))).toEqual([]);
  }, 60_000);
});
