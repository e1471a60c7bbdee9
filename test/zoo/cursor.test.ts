// Cursor, replayed: the requests Cursor Desktop sends to connect to an MCP server with dynamic
// registration (it uses the MCP TypeScript SDK's OAuth client).
//
// - Registration: one request with three redirect URIs, the private-use app scheme first:
//   cursor://anysphere.cursor-mcp/oauth/callback, https://www.cursor.com/agents/mcp/oauth/callback
//   and a loopback callback (erp-mafia/accounted#2225 quotes the body; the scheme URI is the one
//   Cursor's MCP docs name, makeplane/plane-mcp-server#159), token_endpoint_auth_method none,
//   grant_types authorization_code + refresh_token, response_types code (the SDK's client metadata).
//   Servers that refuse the app scheme fail the whole registration (different-ai/openwork#3059).
// - Authorization: redirect_uri cursor://anysphere.cursor-mcp/oauth/callback, PKCE S256, state,
//   resource = the MCP URL (SDK auth.ts startAuthorization).
// - Token: the same redirect_uri, client_id, code_verifier, resource (SDK exchangeAuthorization).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { s256Challenge } from "../../src/grants/pkce.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { tokenRequest } from "../support/oauth-flow.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CURSOR_APP_CALLBACK, CURSOR_REGISTRATION } from "./replays.ts";

const APP = CURSOR_APP_CALLBACK;
const REGISTRATION = CURSOR_REGISTRATION;

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

async function register(): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${t.url}/register`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(REGISTRATION) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("Cursor (cursor:// plus https and loopback in one registration)", () => {
  it("registers all three redirect URIs", async () => {
    const { status, body } = await register();
    expect({ status, error: body.error_description }).toEqual({ status: 201, error: undefined });
    expect(body.redirect_uris).toEqual(REGISTRATION.redirect_uris);
    expect(body.token_endpoint_auth_method).toBe("none");
  });

  it("connects through cursor://: consent says which app it returns to, then tokens", async () => {
    const { body: client } = await register();
    const clientId = client.client_id as string;
    const verifier = randomBytes(32).toString("base64url");
    const state = randomBytes(32).toString("base64url");
    const url = new URL(`${t.url}/authorize`);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: clientId,
      code_challenge: s256Challenge(verifier),
      code_challenge_method: "S256",
      redirect_uri: APP,
      state,
      resource: `${t.url}/mcp`,
    }))
      url.searchParams.set(k, v);

    const browser = new HttpBrowser();
    let consentPage = "";
    const answer = answerAs("alice");
    const callback = await browser.walk(url.href, APP, (at, html) => {
      if (html.includes('name="csrf"')) consentPage = html;
      return answer(at, html);
    });
    expect(consentPage.replace(/<[^>]+>/g, "")).toContain("returns to the app that opens cursor:// links on this computer");
    expect(callback.href.startsWith(`${APP}?`)).toBe(true);
    expect(callback.searchParams.get("state")).toBe(state);
    const code = callback.searchParams.get("code")!;

    const tokens = await tokenRequest(t.url, {
      grant_type: "authorization_code",
      client_id: clientId,
      code,
      code_verifier: verifier,
      redirect_uri: APP,
      resource: `${t.url}/mcp`,
    });
    expect(tokens.status).toBe(200);
    expect(tokens.body).toMatchObject({ token_type: "Bearer", access_token: expect.any(String), refresh_token: expect.any(String) });
  });

  it("also connects through its loopback URI on whatever port it listens on", async () => {
    const { body: client } = await register();
    const verifier = randomBytes(32).toString("base64url");
    const redirectUri = "http://localhost:54021/callback";
    const url = new URL(`${t.url}/authorize`);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: client.client_id as string,
      code_challenge: s256Challenge(verifier),
      code_challenge_method: "S256",
      redirect_uri: redirectUri,
      state: "s",
      resource: `${t.url}/mcp`,
    }))
      url.searchParams.set(k, v);
    const callback = await new HttpBrowser().walk(url.href, redirectUri, answerAs("alice"));
    const tokens = await tokenRequest(t.url, {
      grant_type: "authorization_code",
      client_id: client.client_id as string,
      code: callback.searchParams.get("code")!,
      code_verifier: verifier,
      redirect_uri: redirectUri,
      resource: `${t.url}/mcp`,
    });
    expect(tokens.status).toBe(200);
  });
});
