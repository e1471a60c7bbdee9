// A remembered consent skips the consent page only for a top-level navigation that the person (or
// this broker) started, as the browser tells it in Fetch Metadata: Sec-Fetch-Site none or
// same-origin, Sec-Fetch-Mode navigate, Sec-Fetch-Dest document. A native client opening the
// system browser at /authorize is "none" and stays silent; a page on another site that sends the
// browser to /authorize for a client the person approved gets the consent page, not a code.
// e2e/browser-sessions.test.ts shows both in Chromium.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { authorizeUrl, decide, openConsent, registerTestClient, send, type TestClient } from "../support/oauth-client.ts";

let t: TestBroker;
let client: TestClient;
/** A browser that approved `client` (scope mcp) once. */
let approving: HttpBrowser;
let upstreamAuthorize: string;
beforeAll(async () => {
  t = await startBroker({ TRUST_PROXY: "true" });
  client = await registerTestClient(t.url, { client_name: "Remembered client" });
  approving = new HttpBrowser();
  const form = await openConsent(authorizeUrl(t.url, client, { scope: "mcp" }), approving);
  expect((await decide(form, "allow", approving)).status).toBe(303);
  upstreamAuthorize = (await send(`${t.url}/demo-idp/.well-known/openid-configuration`)).json!.authorization_endpoint as string;
});
afterAll(async () => t.stop());

/**
 * Where /authorize sends the approving browser when the request carries `headers` (in place of a
 * navigation's); with `null`, the request of a tool that is not a browser: Node's fetch, with the
 * browser's cookies and no Sec-Fetch-Site (fetch() adds Sec-Fetch-Mode: cors itself).
 */
async function firstHop(headers: Record<string, string> | null): Promise<"upstream" | "consent"> {
  const url = authorizeUrl(t.url, client, { scope: "mcp" }).href;
  const res = headers
    ? await approving.request(url, { headers })
    : await fetch(url, { redirect: "manual", headers: { cookie: approving.cookieHeader(t.url) } });
  expect(res.status).toBe(302);
  const location = res.headers.get("location")!;
  if (location.startsWith(upstreamAuthorize)) return "upstream";
  expect(location).toContain("/consent?transaction=");
  return "consent";
}

const navigation = (site: string) => ({ "sec-fetch-site": site, "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" });

describe("a remembered consent", () => {
  it.each([
    ["an opened URL (a native client opening the system browser): Sec-Fetch-Site none", navigation("none")],
    ["a navigation from a page of this broker: same-origin", navigation("same-origin")],
  ])("skips the page for %s", async (_name, headers) => {
    expect(await firstHop(headers)).toBe("upstream");
  });

  it.each([
    ["a navigation from another site: cross-site", navigation("cross-site")],
    ["a navigation from another origin of the same site (another port or subdomain): same-site", navigation("same-site")],
    ["a frame, even of an opened page", { ...navigation("none"), "sec-fetch-dest": "iframe" }],
    ["a script's fetch", { "sec-fetch-site": "same-origin", "sec-fetch-mode": "cors", "sec-fetch-dest": "empty" }],
    ["a request without a navigation's Fetch Metadata (an old browser, a tool that is not a browser)", null],
  ])("shows the page for %s", async (_name, headers) => {
    expect(await firstHop(headers)).toBe("consent");
  });

  it("is still remembered after a cross-site attempt: the next opened URL is silent again", async () => {
    expect(await firstHop(navigation("cross-site"))).toBe("consent");
    expect(await firstHop(navigation("none"))).toBe("upstream");
  });
});
