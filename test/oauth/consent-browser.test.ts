// In a real browser: the consent page in headless Chromium. Allow, Deny, two tabs
// answering one request, the browser binding and framing (the CSRF rule and Back-then-submit are
// in e2e/consent-page, reached through the real SDK client). The page with a
// signed-in user and "Not you?", and the front page. Screenshots are kept under
// test-output/screenshots/. Nothing leaves 127.0.0.1: the client's redirect URI is a server on an
// ephemeral port, its logo host (which must never be asked) is answered by request interception.
// (Interception cannot stand in for the redirect URI: Playwright does not see the request that
// follows a redirect, so Chromium met a refused connection there and reloaded a second later.)
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { launchChromium, screenshot } from "../support/browser.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorizeUrl, registerTestClient, send, type TestClient } from "../support/oauth-client.ts";

/** The client's redirect URI: served by `callbackServer`, whose requests go to the current test's list. */
let REDIRECT: string;
let callbacks: URL[] = [];
const callbackServer = createServer((req, res) => {
  const url = new URL(req.url ?? "/", REDIRECT);
  // Only the redirect URI counts: Chromium also asks for /favicon.ico.
  if (url.pathname !== "/callback") return void res.writeHead(404).end();
  callbacks.push(url);
  res.setHeader("content-type", "text/html");
  res.end("<h1>client callback</h1>");
});
const LOGO =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 48 48"><rect width="48" height="48" rx="10" fill="#6d4aff"/><text x="24" y="32" font-size="24" text-anchor="middle" fill="#fff" font-family="sans-serif">A</text></svg>';

let t: TestBroker;
let browser: Browser;
let client: TestClient;
let idpPrefix: string;
beforeAll(async () => {
  await new Promise<void>((resolve) => callbackServer.listen(0, "127.0.0.1", resolve));
  REDIRECT = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
  [t, browser] = await Promise.all([startBroker({ TRUST_PROXY: "true" }), launchChromium()]);
  client = await registerTestClient(t.url, {
    client_name: "Acme Assistant",
    client_uri: "https://acme.example.com",
    logo_uri: "https://acme.example.com/logo.svg",
    redirect_uris: [REDIRECT],
    scope: "mcp offline_access",
  });
  const idp = await send(`${t.url}/demo-idp/.well-known/openid-configuration`);
  idpPrefix = `${t.url}/demo-idp/`;
  expect((idp.json!.authorization_endpoint as string).startsWith(idpPrefix)).toBe(true);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await t?.stop();
  callbackServer.close();
});

/**
 * A fresh browser profile (own cookies) where every request to the client's logo host is answered
 * and recorded; `callbacks` receives the redirect URI's requests from now on.
 */
async function newBrowserContext(options: { mobile?: boolean } = {}): Promise<{ context: BrowserContext; callbacks: URL[]; logoRequests: string[] }> {
  const context = await browser.newContext(
    options.mobile
      ? { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true }
      : { viewport: { width: 1000, height: 900 } },
  );
  callbacks = [];
  const logoRequests: string[] = [];
  await context.route("https://acme.example.com/**", (route) => {
    logoRequests.push(route.request().url());
    return route.fulfill({ status: 200, contentType: "image/svg+xml", body: LOGO });
  });
  return { context, callbacks, logoRequests };
}

async function openConsentPage(context: BrowserContext, state = "browser-state", scope = "mcp offline_access"): Promise<Page> {
  const page = await context.newPage();
  const res = await page.goto(authorizeUrl(t.url, client, { state, scope }).href);
  expect(res?.status()).toBe(200);
  expect(page.url()).toMatch(/\/consent\?transaction=/);
  return page;
}

const allow = (page: Page) => page.getByRole("button", { name: "Allow", exact: true });
const deny = (page: Page) => page.getByRole("button", { name: "Deny", exact: true });

describe("consent page in Chromium", () => {
  it("shows the client, the upstream provider and exactly Allow and Deny (screenshots kept)", async () => {
    const { context, logoRequests } = await newBrowserContext();
    const page = await openConsentPage(context);
    // Self-registered with a loopback redirect: an app on this computer, whatever it calls itself.
    await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe(`An app on this computer wants to connect to ${new URL(t.url).host}`);
    await expect(page.locator("#name-claim").textContent()).resolves.toBe("It calls itself “Acme Assistant”");
    await expect(page.locator("#redirect-host").textContent()).resolves.toBe(new URL(REDIRECT).host);
    await expect(page.locator("#provider-name").textContent()).resolves.toBe("Demo identity provider");
    await expect(page.locator("#unverified").isVisible()).resolves.toBe(true);
    await expect(page.getByText(client.client_id).isVisible()).resolves.toBe(true);
    expect(await page.getByRole("button").allTextContents()).toEqual(["Deny", "Allow"]);
    // The client's logo_uri is not loaded: an initial stands in for it, and its host heard nothing.
    await expect(page.locator("img").count()).resolves.toBe(0);
    await expect(page.locator("#client-initial").textContent()).resolves.toBe("?");
    expect(await page.evaluate<string>('getComputedStyle(document.querySelector("#client-initial")).borderRadius')).toBe("50%");
    expect(logoRequests).toEqual([]);
    await screenshot(page, "consent-page");

    const mobile = await newBrowserContext({ mobile: true });
    const small = await openConsentPage(mobile.context);
    // Readable on a phone: nothing wider than the screen, both buttons on screen.
    expect(await small.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
    await expect(allow(small).isVisible()).resolves.toBe(true);
    await screenshot(small, "consent-page-mobile");
    await mobile.context.close();
    await context.close();
  });

  it("Allow: goes to the upstream login, and back to the client with a code, state and iss", async () => {
    const { context, callbacks } = await newBrowserContext();
    const page = await openConsentPage(context, "allow-state");
    await allow(page).click();
    await page.waitForURL((url) => url.href.startsWith(idpPrefix));
    await page.getByLabel("User name").fill("alice");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => url.href.startsWith(REDIRECT));
    expect(callbacks).toHaveLength(1);
    const params = Object.fromEntries(callbacks[0]!.searchParams);
    expect(params).toMatchObject({ state: "allow-state", iss: t.url });
    expect(params.code).toEqual(expect.any(String));
    await context.close();
  });

  it("Deny: back to the client with error=access_denied, state and iss", async () => {
    const { context, callbacks } = await newBrowserContext();
    const page = await openConsentPage(context, "deny-state");
    await deny(page).click();
    await page.waitForURL((url) => url.href.startsWith(REDIRECT));
    expect(Object.fromEntries(callbacks[0]!.searchParams)).toEqual({
      error: "access_denied",
      error_description: expect.any(String),
      state: "deny-state",
      iss: t.url,
    });
    await context.close();
  });

  it("once only: of two tabs showing the same request, only the first answer counts", async () => {
    const { context, callbacks } = await newBrowserContext();
    const first = await openConsentPage(context);
    const second = await context.newPage();
    // Loading the page again (another tab) does not invalidate the first form.
    await second.goto(first.url());
    await allow(first).click();
    await first.waitForURL((url) => url.href.startsWith(idpPrefix));
    const [refused] = await Promise.all([second.waitForResponse((r) => r.request().method() === "POST"), deny(second).click()]);
    expect(refused.status()).toBe(400);
    await expect(second.getByRole("heading", { level: 1 }).textContent()).resolves.toMatch(/no longer waiting/);
    expect(callbacks).toHaveLength(0);
    await context.close();
  });

  it("only the browser that started the request can see it", async () => {
    const owner = await newBrowserContext();
    const page = await openConsentPage(owner.context);
    const stranger = await newBrowserContext();
    const other = await stranger.context.newPage();
    const res = await other.goto(page.url());
    expect(res?.status()).toBe(400);
    await expect(other.getByRole("button").count()).resolves.toBe(0);
    await stranger.context.close();
    await owner.context.close();
  });

  it("cannot be framed: CSP frame-ancestors 'none' and X-Frame-Options DENY", async () => {
    const { context } = await newBrowserContext();
    const page = await openConsentPage(context);
    const consentUrl = page.url();
    const headers = (await page.reload())!.headers();
    expect(headers["content-security-policy"]).toMatch(/frame-ancestors 'none'/);
    expect(headers["x-frame-options"]).toBe("DENY");

    // Another origin on this machine (another port: cross-origin, same site, so the session
    // cookie even goes along) frames the consent page, a broker error page, and a control page.
    const framerServer = createServer((req, res) => {
      res.setHeader("content-type", "text/html");
      res.end(
        req.url === "/control"
          ? "<p>control frame</p>"
          : `<h1>framer</h1><iframe src="${consentUrl}"></iframe><iframe src="${t.url}/consent?transaction=x"></iframe><iframe src="/control"></iframe>`,
      );
    });
    await new Promise<void>((resolve) => framerServer.listen(0, "127.0.0.1", resolve));
    const framer = await context.newPage();
    const brokerResponses: string[] = [];
    framer.on("response", (r) => {
      if (r.url().startsWith(t.url)) brokerResponses.push(`${r.status()} ${r.headers()["x-frame-options"] ?? "-"}`);
    });
    try {
      await framer.goto(`http://127.0.0.1:${(framerServer.address() as AddressInfo).port}/`);
      await framer.waitForLoadState("load");
    } finally {
      framerServer.close();
    }
    // The broker answered both frames (the consent page itself, then an error page), with DENY...
    expect(brokerResponses.sort()).toEqual(["200 DENY", "400 DENY"]);
    // ...and Chromium refused to show them, while the control frame rendered.
    const children = framer.frames().filter((f) => f !== framer.mainFrame());
    expect(children).toHaveLength(3);
    const contents = await Promise.all(children.map((f) => f.content().catch(() => "")));
    expect(contents.filter((c) => c.includes("control frame"))).toHaveLength(1);
    for (const c of contents) expect(c).not.toMatch(/MCP Auth Broker|name="csrf"/);
    expect(children.filter((f) => f.url().startsWith("chrome-error:"))).toHaveLength(2);
    await screenshot(framer, "consent-framing-blocked");
    await context.close();
  });
});

describe("who is signed in, and the front page, in Chromium", () => {
  it("names the service, the signed-in user and the duration; Not you? signs in another account; / renders (screenshots, desktop and phone)", async () => {
    const app = await registerTestClient(t.url, { client_name: "Acme Assistant", logo_uri: "https://acme.example.com/logo.svg", redirect_uris: [REDIRECT] });
    const { context, callbacks, logoRequests } = await newBrowserContext();
    const open = async (state: string, scope: string) => {
      const p = await context.newPage();
      expect((await p.goto(authorizeUrl(t.url, app, { state, scope }).href))?.status()).toBe(200);
      return p;
    };
    const signIn = async (p: Page, user: string) => {
      await p.waitForURL((url) => url.href.startsWith(idpPrefix));
      await p.getByLabel("User name").fill(user);
      await p.getByRole("button", { name: "Sign in" }).click();
      await p.waitForURL((url) => url.href.startsWith(REDIRECT));
    };
    const host = new URL(t.url).host;
    try {
      // alice connects once: this browser now has a known sign-in.
      const first = await open("first", "mcp offline_access");
      await allow(first).click();
      await signIn(first, "alice");

      // Another scope, so that the remembered consent does not skip the page.
      const page = await open("second", "mcp");
      await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe(`An app on this computer wants to connect to ${host}`);
      await expect(page.locator("#signed-in").textContent()).resolves.toMatch(/^You are signed in as alice \(Demo identity provider\)\.\s+Not you\?/);
      await expect(page.locator("#access-duration").textContent()).resolves.toBe(
        "Access lasts until you revoke it; it ends after 1 day unused and after 30 days at most.",
      );
      expect(await page.getByRole("button").allTextContents()).toEqual(["Not you? Allow with another account", "Deny", "Allow"]);
      await screenshot(page, "consent-page-signed-in");
      await page.setViewportSize({ width: 390, height: 844 });
      expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
      // The decision, and who makes it, in the first screenful (the ids and addresses come after).
      expect(await allow(page).evaluate((b: { getBoundingClientRect(): { bottom: number } }) => b.getBoundingClientRect().bottom)).toBeLessThanOrEqual(844);
      await screenshot(page, "consent-page-signed-in-mobile");

      // Not you?: the demo IdP asks for a login although alice's session there is open; bob signs in.
      await page.getByRole("button", { name: "Not you? Allow with another account" }).click();
      await signIn(page, "bob");
      expect(callbacks.map((u) => u.searchParams.get("state"))).toEqual(["first", "second"]);
      expect(callbacks[1]!.searchParams.get("code")).toEqual(expect.any(String));
      const third = await open("third", "mcp offline_access");
      await expect(third.locator("#signed-in-as").textContent()).resolves.toBe("bob");
      expect(logoRequests).toEqual([]);

      // The front page, at both widths.
      const front = await context.newPage();
      expect((await front.goto(`${t.url}/`))?.status()).toBe(200);
      await expect(front.getByRole("heading", { level: 1 }).textContent()).resolves.toBe(host);
      await expect(front.locator("#mcp-url").textContent()).resolves.toBe(`${t.url}/mcp`);
      await expect(front.getByRole("link", { name: "Your connected apps" }).getAttribute("href")).resolves.toBe(`${t.url}/account`);
      expect(await front.evaluate<string>('getComputedStyle(document.querySelector("#mcp-url")).userSelect')).toBe("all");
      await screenshot(front, "front-page");
      await front.setViewportSize({ width: 390, height: 844 });
      expect(await front.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
      await screenshot(front, "front-page-mobile");
    } finally {
      await context.close();
    }
  });
  it("a refused account: the page names it, and its button returns to the client with access_denied (screenshot)", async () => {
    const closed = await startBroker({ ALLOWED_USERS: "alice", RESOURCE_NAME: "Acme Docs" });
    try {
      const refusedClient = await registerTestClient(closed.url, { client_name: "Acme Assistant", redirect_uris: [REDIRECT] });
      const { context, callbacks } = await newBrowserContext({ mobile: true });
      const page = await context.newPage();
      await page.goto(authorizeUrl(closed.url, refusedClient, { state: "refused-state" }).href);
      await allow(page).click();
      await page.waitForURL((url) => url.href.startsWith(`${closed.url}/demo-idp/`));
      await page.getByLabel("User name").fill("zoe");
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.waitForURL((url) => url.href.startsWith(`${closed.url}/oauth/callback`));
      await expect(page.getByRole("heading", { level: 1 }).textContent()).resolves.toBe("This account cannot use Acme Docs");
      await expect(page.locator("#signed-in-as").textContent()).resolves.toBe("zoe");
      await expect(page.locator("#try-another").textContent()).resolves.toContain("To use another account, sign out of Demo identity provider");
      await screenshot(page, "access-refused-phone");
      expect(callbacks).toHaveLength(0);
      await page.getByRole("link", { name: "Return to Acme Assistant" }).click();
      await page.waitForURL((url) => url.href.startsWith(REDIRECT));
      expect(Object.fromEntries(callbacks[0]!.searchParams)).toEqual({
        error: "access_denied",
        error_description: "This Demo identity provider account may not use Acme Docs.",
        state: "refused-state",
        iss: closed.url,
      });
      await context.close();
    } finally {
      await closed.stop();
    }
  });
});
