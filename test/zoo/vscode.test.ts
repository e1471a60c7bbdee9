// VS Code, replayed: the requests its MCP client sends when the server offers dynamic registration.
//
// - Registration: microsoft/vscode src/vs/base/common/oauth.ts, fetchDynamicRegistration():
//   client_name (the product name), client_uri https://code.visualstudio.com, grant_types = the
//   server's grant_types_supported ∩ [authorization_code, refresh_token, device_code],
//   response_types [code], redirect_uris [https://insiders.vscode.dev/redirect,
//   https://vscode.dev/redirect, http://127.0.0.1/, http://127.0.0.1:33418/] (DEFAULT_AUTH_FLOW_PORT
//   = 33418), scope, token_endpoint_auth_method none, application_type native.
// - Authorization: the loopback server tries 33418 and, when it is taken (a second VS Code window),
//   listens on a random port and sends that one: `redirect_uri=http%3A%2F%2F127.0.0.1%3A59656%2F`
//   (microsoft/vscode#278512, closed by VS Code as the server's job: RFC 8252 §7.3). PKCE S256,
//   resource = the MCP URL (extHostAuthentication.ts DynamicAuthProvider).
// - Token: the same redirect_uri (the random port), client_id, code_verifier, resource.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { s256Challenge } from "../../src/grants/pkce.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { tokenRequest } from "../support/oauth-flow.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { initializeAs, mcpPost } from "../support/mcp-probe.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

async function registerAsVsCode(): Promise<Record<string, unknown>> {
  const as = (await (await fetch(`${t.url}/.well-known/oauth-authorization-server`)).json()) as {
    registration_endpoint: string;
    grant_types_supported?: string[];
  };
  const wanted = ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"];
  const res = await fetch(as.registration_endpoint, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "Visual Studio Code",
      client_uri: "https://code.visualstudio.com",
      grant_types: as.grant_types_supported ? as.grant_types_supported.filter((g) => wanted.includes(g)) : wanted,
      response_types: ["code"],
      redirect_uris: ["https://insiders.vscode.dev/redirect", "https://vscode.dev/redirect", "http://127.0.0.1/", "http://127.0.0.1:33418/"],
      scope: "mcp",
      token_endpoint_auth_method: "none",
      application_type: "native",
    }),
  });
  expect(res.status).toBe(201);
  return (await res.json()) as Record<string, unknown>;
}

describe("VS Code (DCR, loopback port fallback)", () => {
  it.each([
    ["33418 is taken: a random port", "http://127.0.0.1:59656/"],
    ["the default port", "http://127.0.0.1:33418/"],
  ])("connects when %s", async (_what, redirectUri) => {
    const client = await registerAsVsCode();
    expect(client.redirect_uris).toContain("http://127.0.0.1:33418/");
    const verifier = randomBytes(32).toString("base64url");
    const state = randomBytes(16).toString("base64");
    const url = new URL(`${t.url}/authorize`);
    for (const [k, v] of Object.entries({
      client_id: client.client_id as string,
      response_type: "code",
      code_challenge: s256Challenge(verifier),
      code_challenge_method: "S256",
      scope: "mcp",
      resource: `${t.url}/mcp`,
      redirect_uri: redirectUri,
      state,
    }))
      url.searchParams.set(k, v);

    const browser = new HttpBrowser();
    const callback = await browser.walk(url.href, redirectUri, answerAs("alice"));
    expect(`${callback.origin}${callback.pathname}`).toBe(redirectUri);
    expect(callback.searchParams.get("state")).toBe(state);
    expect(callback.searchParams.get("iss")).toBe(t.url);
    const code = callback.searchParams.get("code")!;

    const form = { grant_type: "authorization_code", client_id: client.client_id as string, code, code_verifier: verifier, resource: `${t.url}/mcp` };
    // The port the listener really had is what VS Code sends; the registered default is not enough.
    if (redirectUri !== "http://127.0.0.1:33418/") {
      const wrong = await tokenRequest(t.url, { ...form, redirect_uri: "http://127.0.0.1:33418/" });
      expect(wrong.body.error).toBe("invalid_grant");
    }
    const tokens = await tokenRequest(t.url, { ...form, redirect_uri: redirectUri });
    expect(tokens.status).toBe(200);
    expect(tokens.body).toMatchObject({ token_type: "Bearer", access_token: expect.any(String), refresh_token: expect.any(String) });

    const mcp = await mcpPost(t.url, tokens.body.access_token as string, initializeAs({ name: "Visual Studio Code", version: "1.106.0" }));
    expect(mcp.status).toBe(200);
    await mcp.body?.cancel();

    const refreshed = await tokenRequest(t.url, {
      grant_type: "refresh_token",
      client_id: client.client_id as string,
      refresh_token: tokens.body.refresh_token as string,
      resource: `${t.url}/mcp`,
    });
    expect(refreshed.status).toBe(200);
  });
});
