// The browser session cookie: HttpOnly, SameSite=Lax, and Secure with the __Host- prefix whenever
// PUBLIC_URL is https (even when TLS ends at a proxy in front of the broker).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { registerClient } from "../support/oauth-flow.ts";
import { s256Challenge } from "../../src/grants/pkce.ts";

async function authorizeCookie(t: TestBroker): Promise<string> {
  const client = await registerClient(t.url);
  const url = new URL(`${t.url}/authorize`);
  for (const [k, v] of Object.entries({
    response_type: "code",
    client_id: client.client_id,
    redirect_uri: client.redirect_uri,
    code_challenge: s256Challenge("c".repeat(43)),
    code_challenge_method: "S256",
  }))
    url.searchParams.set(k, v);
  const res = await fetch(url, { redirect: "manual" });
  expect(res.status).toBe(302);
  return res.headers.getSetCookie().join("\n");
}

describe("browser session cookie", () => {
  let plain: TestBroker;
  beforeAll(async () => {
    plain = await startBroker();
  });
  afterAll(async () => plain.stop());

  it("is HttpOnly and SameSite=Lax on a loopback http broker", async () => {
    const cookies = await authorizeCookie(plain);
    expect(cookies).toMatch(/^mab_session=[^;]+;.*httponly/im);
    expect(cookies).toMatch(/samesite=lax/i);
    expect(cookies).not.toMatch(/secure/i);
  });

  it("is Secure with the __Host- prefix when PUBLIC_URL is https", async () => {
    // The test speaks plain http to the port, as a TLS-terminating proxy in front would.
    const t = await startBroker({ PUBLIC_URL: "https://mcp.example.com", HOST: "127.0.0.1" });
    try {
      const port = t.broker.config.port;
      const client = await fetch(`http://127.0.0.1:${port}/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ redirect_uris: ["https://app.example/cb"], token_endpoint_auth_method: "none" }),
      }).then((r) => r.json() as Promise<{ client_id: string }>);
      const url = new URL(`http://127.0.0.1:${port}/authorize`);
      for (const [k, v] of Object.entries({
        response_type: "code",
        client_id: client.client_id,
        redirect_uri: "https://app.example/cb",
        code_challenge: s256Challenge("d".repeat(43)),
        code_challenge_method: "S256",
      }))
        url.searchParams.set(k, v);
      const res = await fetch(url, { redirect: "manual" });
      expect(res.status).toBe(302);
      expect(res.headers.get("location")).toMatch(/^https:\/\/mcp\.example\.com\/consent\?transaction=/);
      const cookies = res.headers.getSetCookie().join("\n");
      expect(cookies).toMatch(/^__Host-mab_session=[^;]+;.*path=\/;.*secure.*httponly/im);
      expect(cookies).toMatch(/samesite=lax/i);
      expect(res.headers.get("strict-transport-security")).toContain("max-age=");
    } finally {
      await t.stop();
    }
  });
});
