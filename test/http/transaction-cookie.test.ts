// The cookie that binds one pending authorization to the browser that started it: one per
// transaction (authorizations started together in one browser keep their own), HttpOnly,
// SameSite=Lax, Path=/, as long as the transaction lives, Secure with the __Host- prefix on https,
// removed when the transaction ends, and at most MAX_TRANSACTION_COOKIES of them in one browser.
// e2e/browser-sessions.test.ts runs concurrent authorizations in Chromium.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { authorizeUrl, decide, openConsent, readConsent, registerTestClient, type TestClient } from "../support/oauth-client.ts";
import { MAX_TRANSACTION_COOKIES } from "../../src/http/transaction-cookie.ts";

let t: TestBroker;
let client: TestClient;
beforeAll(async () => {
  t = await startBroker({ TRUST_PROXY: "true" });
  client = await registerTestClient(t.url, { client_name: "Cookie test client" });
});
afterAll(async () => t.stop());

const transactionCookies = (browser: HttpBrowser) => Object.keys(browser.cookies(t.url)).filter((name) => name.startsWith("mab_tx_"));

describe("the transaction cookie", () => {
  it("is one per transaction, named after it: HttpOnly, SameSite=Lax, Path=/, living as long as the transaction", async () => {
    const browser = new HttpBrowser();
    const res = await browser.request(authorizeUrl(t.url, client).href);
    const transaction = new URL(res.headers.get("location")!).searchParams.get("transaction")!;
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith(`mab_tx_${transaction}=`));
    expect(cookie).toBeDefined();
    expect(cookie).toMatch(/; path=\/;/i);
    expect(cookie).toMatch(/; httponly/i);
    expect(cookie).toMatch(/; samesite=lax/i);
    expect(cookie).not.toMatch(/; secure/i);
    // Until the transaction expires (the cookies module writes Expires, not Max-Age).
    const expires = Date.parse(/; expires=([^;]+)/i.exec(cookie!)?.[1] ?? "");
    const tx = await t.broker.database.db.authTransaction.findUniqueOrThrow({ where: { id: transaction } });
    expect(Math.abs(expires - tx.expiresAt.getTime())).toBeLessThan(2000);
  });

  it("is Secure with the __Host- prefix when PUBLIC_URL is https", async () => {
    const b = await startBroker({ PUBLIC_URL: "https://mcp.example.com" });
    try {
      const listen = b.origin;
      const c = await registerTestClient(listen, { redirect_uris: ["https://app.example/cb"] });
      const res = await new HttpBrowser().request(authorizeUrl(listen, c, { resource: "https://mcp.example.com/mcp" }).href);
      expect(res.status).toBe(302);
      const transaction = new URL(res.headers.get("location")!).searchParams.get("transaction")!;
      const cookie = res.headers.getSetCookie().find((v) => v.startsWith(`__Host-mab_tx_${transaction}=`));
      expect(cookie).toMatch(/; path=\/;/i);
      expect(cookie).toMatch(/; secure/i);
      expect(cookie).toMatch(/; httponly/i);
      expect(cookie).not.toMatch(/; domain=/i);
    } finally {
      await b.stop();
    }
  });

  it("keeps authorizations started at the same moment in a fresh browser apart: both complete", async () => {
    const browser = new HttpBrowser();
    // Both requests leave before either answer is back: each sets a browser session of its own.
    const firsts = await Promise.all(["first", "second"].map((state) => browser.request(authorizeUrl(t.url, client, { state }).href)));
    const pages = firsts.map((res) => new URL(res.headers.get("location")!, t.url).href);
    const forms = await Promise.all(pages.map((page) => readConsent(page, browser)));
    for (const [i, state] of ["first", "second"].entries()) {
      const res = await decide(forms[i]!, "allow", browser);
      expect(res.status).toBe(303);
      const back = await browser.walk(res.headers.get("location")!, client.redirect_uri, answerAs("alice"));
      expect(back.searchParams.get("state")).toBe(state);
      expect(back.searchParams.get("code")).toEqual(expect.any(String));
    }
  });

  it("is removed when the transaction ends: after Deny, and after the callback", async () => {
    const browser = new HttpBrowser();
    const denied = await openConsent(authorizeUrl(t.url, client), browser);
    expect(transactionCookies(browser)).toEqual([`mab_tx_${denied.transaction}`]);
    await decide(denied, "deny", browser);
    expect(transactionCookies(browser)).toEqual([]);

    const allowed = await openConsent(authorizeUrl(t.url, client), browser);
    const res = await decide(allowed, "allow", browser);
    const callback = await browser.walk(res.headers.get("location")!, `${t.url}/oauth/callback`, answerAs("alice"));
    expect(transactionCookies(browser)).toEqual([`mab_tx_${allowed.transaction}`]);
    expect((await browser.request(callback.href)).status).toBe(302);
    expect(transactionCookies(browser)).toEqual([]);
  });

  it(`is kept for at most ${MAX_TRANSACTION_COOKIES} transactions per browser: a new one evicts the oldest`, async () => {
    const browser = new HttpBrowser();
    const forms = [];
    for (let i = 0; i <= MAX_TRANSACTION_COOKIES; i++) forms.push(await openConsent(authorizeUrl(t.url, client, { state: `s${i}` }), browser));
    expect(transactionCookies(browser)).toHaveLength(MAX_TRANSACTION_COOKIES);
    expect(transactionCookies(browser)).not.toContain(`mab_tx_${forms[0]!.transaction}`);
    // The evicted one is no longer this browser's; the newest still is.
    expect((await browser.request(forms[0]!.pageUrl)).status).toBe(400);
    expect((await decide(forms.at(-1)!, "allow", browser)).status).toBe(303);
  });
});
