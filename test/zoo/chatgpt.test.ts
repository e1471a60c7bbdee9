// ChatGPT connectors, replayed: dynamic registration with an https redirect on chatgpt.com, then
// the code flow from ChatGPT's servers.
//
// - Registration: redirect_uris [https://chatgpt.com/connector_platform_oauth_redirect] (the fixed
//   callback; newer connectors use https://chatgpt.com/connector/oauth/<id>: kunickiaj/codemem#1286,
//   makeplane/plane-mcp-server#165, danielealbano/android-remote-control-mcp#166, which also
//   notes ChatGPT asking for offline_access), public client (token_endpoint_auth_method none),
//   authorization_code + refresh_token.
// - Authorization: redirect_uri as registered, PKCE S256, state, resource = the MCP URL, scope.
// - Token: redirect_uri, client_id, code_verifier, resource.
//
// An https redirect is where the open redirector was: anyone can register chatgpt.com look-alikes
// (or any site), and /authorize used to send an error there before the user saw anything. A
// connector the user never approved now gets a page; one this browser approved gets its errors.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { s256Challenge } from "../../src/grants/pkce.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { tokenRequest } from "../support/oauth-flow.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";

const CALLBACK = "https://chatgpt.com/connector_platform_oauth_redirect";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

async function register(redirect = CALLBACK): Promise<string> {
  const res = await fetch(`${t.url}/register`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      client_name: "ChatGPT",
      redirect_uris: [redirect],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    }),
  });
  expect(res.status).toBe(201);
  return ((await res.json()) as { client_id: string }).client_id;
}

function authorizeUrl(clientId: string, verifier: string, extra: Record<string, string> = {}, redirect = CALLBACK): string {
  const url = new URL(`${t.url}/authorize`);
  for (const [k, v] of Object.entries({
    response_type: "code",
    client_id: clientId,
    redirect_uri: redirect,
    state: randomBytes(16).toString("hex"),
    code_challenge: s256Challenge(verifier),
    code_challenge_method: "S256",
    scope: "mcp offline_access",
    resource: `${t.url}/mcp`,
    ...extra,
  }))
    url.searchParams.set(k, v);
  return url.href;
}

describe("ChatGPT connectors (DCR, https redirect)", () => {
  it("connects: consent, code to chatgpt.com, tokens", async () => {
    const clientId = await register();
    const verifier = randomBytes(32).toString("base64url");
    const callback = await new HttpBrowser().walk(authorizeUrl(clientId, verifier), CALLBACK, answerAs("alice"));
    const tokens = await tokenRequest(t.url, {
      grant_type: "authorization_code",
      client_id: clientId,
      code: callback.searchParams.get("code")!,
      code_verifier: verifier,
      redirect_uri: CALLBACK,
      resource: `${t.url}/mcp`,
    });
    expect(tokens.status).toBe(200);
    expect(tokens.body).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), scope: "mcp offline_access" });
  });

  it("never redirects an error to an https URI the browser's user did not approve", async () => {
    // The same registration, pointing anywhere: errors from /authorize are a page, not a 302.
    const evil = "https://attacker.example/landing";
    const clientId = await register(evil);
    const brokenRequests: Record<string, string>[] = [
      { code_challenge_method: "plain" },
      { resource: "https://elsewhere.example/mcp" },
      { response_type: "token" },
    ];
    for (const broken of brokenRequests) {
      const res = await fetch(authorizeUrl(clientId, randomBytes(32).toString("base64url"), broken, evil), { redirect: "manual" });
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).not.toContain("attacker.example");
    }
  });

  it("sends errors back to chatgpt.com once this browser approved the connector", async () => {
    const clientId = await register();
    const browser = new HttpBrowser();
    await browser.walk(authorizeUrl(clientId, randomBytes(32).toString("base64url")), CALLBACK, answerAs("alice"));
    const res = await browser.request(authorizeUrl(clientId, randomBytes(32).toString("base64url"), { code_challenge_method: "plain" }));
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location")!);
    expect(`${location.origin}${location.pathname}`).toBe(CALLBACK);
    expect(location.searchParams.get("error")).toBe("invalid_request");
  });
});
