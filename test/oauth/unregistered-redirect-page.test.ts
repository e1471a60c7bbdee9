// The page shown for a redirect_uri the application did not register names the address that was
// sent (escaped), so the application's developer can compare it with the registration.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { registerClient } from "../support/oauth-flow.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

describe("an unregistered redirect address", () => {
  it("is shown on the page, escaped, and nobody is sent there", async () => {
    const client = await registerClient(t.url, { redirect_uris: ["http://127.0.0.1:7777/callback"] });
    const sent = 'https://app.example.com/oauth/cb?x="<b>"';
    const url = new URL(`${t.url}/authorize`);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: client.client_id,
      redirect_uri: sent,
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      state: "s",
    }))
      url.searchParams.set(k, v);
    const res = await fetch(url, { redirect: "manual" });
    expect(res.status).toBe(400);
    expect(res.headers.get("location")).toBeNull();
    const page = await res.text();
    expect(page).toContain("Unregistered redirect address");
    expect(page).toContain(
      "The address this request wants to return to, https://app.example.com/oauth/cb?x=&quot;&lt;b&gt;&quot;, is not registered for the application",
    );
  });
});
