// The connected-apps page in Chromium on a phone, with JavaScript off: sign in with the page's
// button through the demo IdP, read the list, Revoke one, Revoke all, Sign out. The apps are two
// real MCP SDK clients; each one's access token stops working at /mcp as soon as the page says so.
// Screenshots go to test-output/screenshots/account-phone-*.png.
import { expect, it } from "@jest/globals";
import type { Page } from "playwright-core";
import { describeWithChromium, PHONE, screenshot, useBrokerAndCallback, useChromium } from "../support/browser.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { connectWithOAuth, TestOAuthProvider, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { mcpStatus } from "../support/mcp-probe.ts";

const chromium = useChromium();

describeWithChromium("the connected-apps page in Chromium", () => {
  const env = useBrokerAndCallback(chromium);

  async function connectApp(name: string, browser: HttpBrowser): Promise<ConnectedClient> {
    const authorize = async (url: URL) => {
      await fetch(await browser.walk(url.href, env.callback.url, answerAs("sofia")));
    };
    return connectWithOAuth(`${env.broker.url}/mcp`, env.callback, authorize, new TestOAuthProvider(env.callback.url, authorize, name));
  }

  const statusOf = (c: ConnectedClient) => mcpStatus(env.broker.url, c.provider.savedTokens!.access_token);

  /** Nothing wider than the phone, and the page's stylesheet intact. */
  async function fitsThePhone(page: Page): Promise<void> {
    expect(await page.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
    expect(await page.evaluate<string>("getComputedStyle(document.body).fontFamily")).toContain("system-ui");
  }

  /** Clicks a button of the page and waits for the page the form's POST leads to. */
  async function press(page: Page, button: ReturnType<Page["locator"]>): Promise<void> {
    const here = page.url();
    await Promise.all([page.waitForURL((u) => u.href !== here, { waitUntil: "load" }), button.click()]);
  }

  it("on a phone without JavaScript: sign in, list, Revoke, Revoke all, Sign out", async () => {
    const elsewhere = new HttpBrowser();
    const notes = await connectApp("Notes app", elsewhere);
    const calendar = await connectApp("Calendar app", elsewhere);
    const context = await chromium.browser.newContext({ ...PHONE, javaScriptEnabled: false });
    try {
      const page = await context.newPage();
      await page.goto(`${env.broker.url}/account`);
      await fitsThePhone(page);
      await screenshot(page, "account-phone-1-signed-out");
      const signIn = page.getByRole("button", { name: "Sign in with Demo identity provider", exact: true });
      await expect(signIn.isVisible()).resolves.toBe(true);
      await press(page, signIn);

      // The demo IdP's login page, then back to the list.
      await page.getByLabel("User name").fill("sofia");
      await Promise.all([
        page.waitForURL((u) => u.pathname === "/account", { waitUntil: "load" }),
        page.getByRole("button", { name: "Sign in", exact: true }).click(),
      ]);
      await fitsThePhone(page);
      await expect(page.locator("#signed-in-as").textContent()).resolves.toBe("sofia");
      const names = async () => page.locator("section.app .app-name").allTextContents();
      expect(await names()).toEqual(["Calendar app", "Notes app"]);
      const notesApp = page.locator("section.app", { hasText: "Notes app" });
      await expect(notesApp.locator(".redirect-host").textContent()).resolves.toBe(new URL(env.callback.url).host);
      await expect(notesApp.locator(".badge").textContent()).resolves.toBe("Unverified");
      for (const field of [".scopes", ".created", ".last-used", ".ends"]) await expect(notesApp.locator(field).isVisible()).resolves.toBe(true);
      // Each app's Revoke button is in reach of a thumb: inside the screen's width.
      const box = await notesApp.getByRole("button", { name: "Revoke Notes app" }).boundingBox();
      expect(box!.x + box!.width).toBeLessThanOrEqual(390);
      await screenshot(page, "account-phone-2-list");

      // Revoke one.
      expect(await statusOf(notes)).toBe(200);
      await press(page, notesApp.getByRole("button", { name: "Revoke Notes app" }));
      await expect(page.locator("#notice").isVisible()).resolves.toBe(true);
      expect(await names()).toEqual(["Calendar app"]);
      expect(await statusOf(notes)).toBe(401);
      expect(await statusOf(calendar)).toBe(200);
      await fitsThePhone(page);
      await screenshot(page, "account-phone-3-revoked");

      // Revoke all.
      await press(page, page.getByRole("button", { name: "Revoke all", exact: true }));
      expect(await names()).toEqual([]);
      await expect(page.locator("#no-apps").isVisible()).resolves.toBe(true);
      expect(await statusOf(calendar)).toBe(401);
      await screenshot(page, "account-phone-4-revoked-all");

      // Sign out: back to the sign-in button.
      await press(page, page.getByRole("button", { name: "Sign out", exact: true }));
      await expect(signIn.isVisible()).resolves.toBe(true);
      await expect(page.locator("#notice").textContent()).resolves.toContain("You are signed out");
      await expect(page.locator("#signed-in-as").count()).resolves.toBe(0);
      await fitsThePhone(page);
      await screenshot(page, "account-phone-5-signed-out-again");
    } finally {
      await context.close();
      for (const c of [notes, calendar]) {
        await c.transport.terminateSession().catch(() => undefined);
        await c.client.close();
      }
    }
  });
});
