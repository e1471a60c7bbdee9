// The consent page in Chromium, reached the way users reach it: from the authorization URL the
// real MCP SDK client builds. The CSRF rule, the once-only rule (Back, then submit again), and the
// page on a phone; screenshots are kept under test-output/screenshots/. (Allow and Deny with their
// outcomes at the client are in upstreams and session-lifecycle; framing and two tabs answering
// one request are in oauth/consent-browser.)
import { expect, it } from "@jest/globals";
import type { BrowserContext, Page } from "playwright-core";
import { clickThrough, describeWithChromium, useBrokerAndCallback, newUser, PHONE, screenshot, useChromium } from "../support/browser.ts";
import { connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";

const chromium = useChromium();

describeWithChromium("the consent page in Chromium, from the MCP SDK's authorization URL", () => {
  const env = useBrokerAndCallback(chromium);

  /** The SDK connects; `userActs` is the user in a fresh browser, given the authorization URL. */
  async function connectAs(context: BrowserContext, userActs: (page: Page, url: URL) => Promise<void>): Promise<ConnectedClient> {
    return connectWithOAuth(`${env.broker.url}/mcp`, env.callback, async (url) => {
      const page = await context.newPage();
      await userActs(page, url);
    });
  }

  async function subjectOf(c: ConnectedClient): Promise<string> {
    try {
      const result = (await c.client.callTool({ name: "whoami", arguments: {} })) as { content: Array<{ text: string }> };
      return (JSON.parse(result.content[0]!.text) as { subject: string }).subject;
    } finally {
      await c.transport.terminateSession().catch(() => undefined);
      await c.client.close();
    }
  }

  const heading = (page: Page) => page.getByRole("heading", { level: 1 }).textContent();
  const submitted = (page: Page) => page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname === "/consent");

  it("CSRF: a tampered token is refused; the genuine form, loaded again, still works", async () => {
    const context = await newUser(chromium.browser);
    try {
      const c = await connectAs(context, async (page, url) => {
        await page.goto(url.href);
        await page.locator('input[name="csrf"]').evaluate((el: { value: string }) => {
          el.value = "forged-token";
        });
        const [refused] = await Promise.all([submitted(page), page.getByRole("button", { name: "Allow", exact: true }).click()]);
        expect(refused.status()).toBe(400);
        await page.waitForLoadState();
        await expect(heading(page)).resolves.toBe("This request is no longer waiting for you");
        await screenshot(page, "e2e-consent-csrf-refused");
        await page.goBack();
        await clickThrough(page, page.url(), { user: "carol", redirectUri: env.callback.url, name: "e2e-consent-csrf-retry" });
      });
      await expect(subjectOf(c)).resolves.toBe("demo:carol");
    } finally {
      await context.close();
    }
  });

  it("once only: after the flow, Back to the consent page and submitting it again is refused", async () => {
    const context = await newUser(chromium.browser);
    let form = "";
    try {
      const c = await connectAs(context, async (page, url) => {
        await clickThrough(page, url, {
          user: "olga",
          name: "e2e-consent-once",
          inspect: async (p, kind) => {
            if (kind === "consent") form = await p.locator("form").evaluate((f: { outerHTML: string }) => f.outerHTML);
          },
        });
        // Back, as far as the consent page (the upstream login page is on the way).
        for (let i = 0; i < 3 && !new URL(page.url()).pathname.startsWith("/consent"); i++) await page.goBack();
        expect(new URL(page.url()).pathname).toBe("/consent");
        // The page is not kept (no-store): loading it again shows that it was answered.
        await expect(heading(page)).resolves.toBe("This request is no longer waiting for you");
        // The old form, as a browser that had kept the page would show it, submitted again.
        await page.setContent(form);
        const [again] = await Promise.all([submitted(page), page.getByRole("button", { name: "Allow", exact: true }).click()]);
        expect(again.status()).toBe(400);
        await page.waitForLoadState();
        await expect(heading(page)).resolves.toBe("This request is no longer waiting for you");
        await screenshot(page, "e2e-consent-once-refused");
      });
      expect(form).toContain('name="csrf"');
      await expect(subjectOf(c)).resolves.toBe("demo:olga");
      // One decision, one code.
      expect(await env.broker.broker.database.db.authorizationCode.count({ where: { clientId: c.provider.clientInfo!.client_id } })).toBe(1);
    } finally {
      await context.close();
    }
  });

  it("on a phone (390 px wide): readable, labelled, client, service and redirect host up front, provider named", async () => {
    const context = await newUser(chromium.browser, PHONE);
    try {
      const c = await connectAs(context, async (page, url) => {
        const { pages } = await clickThrough(page, url, {
          user: "pia",
          name: "e2e-consent-phone",
          inspect: async (p, kind) => {
            if (kind === "callback") return; // the client's own page
            // Nothing wider than the screen on the broker's and the IdP's pages.
            expect(await p.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(390);
            // The page's stylesheet is intact (all of it: a broken rule once dropped the font).
            expect(await p.evaluate<string>("getComputedStyle(document.body).fontFamily")).toContain("system-ui");
            if (kind !== "consent") return;
            // The SDK registered itself with a loopback redirect: its name is a claim, not the lead.
            await expect(heading(p)).resolves.toBe(`An app on this computer wants to connect to ${new URL(env.broker.url).host}`);
            await expect(p.locator("#name-claim").textContent()).resolves.toBe("It calls itself “SDK e2e client”");
            await expect(p.getByRole("main").count()).resolves.toBe(1);
            // The decision and who will see it, in the first screenful.
            for (const target of [
              p.getByRole("button", { name: "Allow", exact: true }),
              p.getByRole("button", { name: "Deny", exact: true }),
              p.locator("#redirect-host"),
              p.locator("#provider-name"),
            ]) {
              await expect(target.isVisible()).resolves.toBe(true);
            }
            expect(
              await p
                .getByRole("button", { name: "Allow", exact: true })
                .evaluate((b: { getBoundingClientRect(): { bottom: number } }) => b.getBoundingClientRect().bottom),
            ).toBeLessThanOrEqual(844);
            await expect(p.locator("#redirect-host").textContent()).resolves.toBe(new URL(env.callback.url).host);
            await expect(p.locator("#provider-name").textContent()).resolves.toBe("Demo identity provider");
          },
        });
        expect(pages.map((p) => p.kind)).toEqual(["consent", "demo-login", "callback"]);
        // The refusal page, as a phone shows it.
        await page.goto(pages[0]!.url);
        await screenshot(page, "e2e-consent-phone-refused");
      });
      await expect(subjectOf(c)).resolves.toBe("demo:pia");
    } finally {
      await context.close();
    }
  });
});
