// The browser side of authorizations, in headless Chromium: several authorizations started at
// the same moment in one fresh browser profile (VS Code and Cursor connect their servers at once,
// claude.ai registers twice per attempt) must all complete: each pending authorization is bound
// to the browser by a cookie of its own, not by the one session cookie that the first answers of
// a fresh profile each set anew. And a consent the browser remembers is used silently only when the
// person opened /authorize (a native client opening the system browser), never when a page of
// another site sends the browser there. Nothing leaves 127.0.0.1: the client's redirect URI is a server
// on an ephemeral port. The upstream is the GitHub emulator, which (like GitHub's authorize page
// for a signed-in user) keeps no browser session of its own: the demo IdP (oidc-provider) rotates
// its session cookie at every login it resumes, so its own logins collide when six run at once in
// a fresh profile ("interaction session and authentication session mismatch"), whatever the broker does.
import { beforeAll, expect, it } from "@jest/globals";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { clickThrough, describeWithChromium, newUser, screenshot, useChromium } from "../support/browser.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorizeUrl, registerTestClient, type TestClient } from "../support/oauth-client.ts";
import { startGitHubEmulator } from "../support/github-emulator.ts";

describeWithChromium("authorizations in one browser", () => {
  const suite = useChromium();
  let t: TestBroker;
  let client: TestClient;
  let redirectUri: string;
  beforeAll(async () => {
    // The client's redirect URI: a page that only says it was reached (Chromium also asks for /favicon.ico).
    const callbackServer = createServer((req, res) => {
      if (!req.url?.startsWith("/callback")) return void res.writeHead(404).end();
      res.setHeader("content-type", "text/html");
      res.end("<h1>client callback</h1>");
    });
    await new Promise<void>((resolve) => callbackServer.listen(0, "127.0.0.1", resolve));
    suite.cleanup(() => new Promise((resolve) => callbackServer.close(resolve)));
    redirectUri = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
    const github = await startGitHubEmulator({ clientId: "Iv1.broker", clientSecret: "emulator-secret" });
    suite.cleanup(() => github.close());
    t = await startBroker({
      TRUST_PROXY: "true",
      UPSTREAM_PROVIDER: "github",
      ALLOW_ANY_USER: "true",
      UPSTREAM_CLIENT_ID: "Iv1.broker",
      UPSTREAM_CLIENT_SECRET: "emulator-secret",
      GITHUB_URL: github.url,
      GITHUB_API_URL: github.apiUrl,
    });
    suite.cleanup(() => t.stop());
    client = await registerTestClient(t.url, { client_name: "Parallel client", redirect_uris: [redirectUri] });

    // Another site: a page that sends the browser to whatever /authorize URL its query names.
    const otherSite = createServer((req, res) => {
      const target = new URL(req.url ?? "/", "http://localhost").searchParams.get("go");
      if (!target) return void res.writeHead(404).end();
      res.setHeader("content-type", "text/html");
      res.end(`<!doctype html><title>Another site</title><p>Loading…</p><script>location.href = ${JSON.stringify(target)};</script>`);
    });
    await new Promise<void>((resolve) => otherSite.listen(0, "127.0.0.1", resolve));
    suite.cleanup(() => new Promise((resolve) => otherSite.close(resolve)));
    // localhost, not 127.0.0.1: a site is its host name without the port, so the same host on
    // another port would be the broker's own site ("same-site"); localhost is another site, and
    // Chromium resolves it to the loopback address without asking anyone.
    otherSiteUrl = `http://localhost:${(otherSite.address() as AddressInfo).port}/`;
  }, 60_000);
  let otherSiteUrl: string;

  const FLOWS = 6;
  // Five runs are enough to catch the race again: with one cookie per browser session, 100 of 120
  // flows failed over 20 runs (32e24d5), about five of the six in every run. Each run is a fresh
  // profile and six Chromium pages, the suite's slowest file at 20 runs (84 s).
  const RUNS = 5;

  it(`${FLOWS} authorizations started at once in a fresh profile all complete (${RUNS} runs)`, async () => {
    const failures: string[] = [];
    for (let run = 1; run <= RUNS; run++) {
      const context = await newUser(suite.browser);
      try {
        const pages = await Promise.all(Array.from({ length: FLOWS }, () => context.newPage()));
        const outcomes = await Promise.allSettled(
          pages.map((page, flow) =>
            clickThrough(page, authorizeUrl(t.url, client, { state: `run${run}-flow${flow}` }), {
              user: "octocat",
              upstream: "github",
              name: `parallel-run${run}-flow${flow}`,
              // Six pages at once on a busy machine: what counts is that each completes, not how fast.
              timeoutMs: 120_000,
            }),
          ),
        );
        outcomes.forEach((outcome, flow) => {
          if (outcome.status === "rejected") {
            failures.push(`run ${run}, flow ${flow}: ${(outcome.reason as Error).message.split("\n").slice(0, 3).join(" ")}`);
            return;
          }
          const params = outcome.value.callback.searchParams;
          if (params.get("state") !== `run${run}-flow${flow}` || !params.get("code")) failures.push(`run ${run}, flow ${flow}: ${outcome.value.callback.href}`);
        });
      } finally {
        await context.close();
      }
    }
    expect({ failed: failures.length, of: RUNS * FLOWS, failures }).toEqual({ failed: 0, of: RUNS * FLOWS, failures: [] });
  }, 1_800_000);

  it("a remembered consent stays silent for an opened URL, and asks when another site starts the authorization", async () => {
    const context = await newUser(suite.browser);
    try {
      const page = await context.newPage();
      const pagesOf = (run: Awaited<ReturnType<typeof clickThrough>>) => run.pages.map((p) => p.kind);
      // The first authorization asks, the person allows and signs in.
      const first = await clickThrough(page, authorizeUrl(t.url, client, { state: "first" }), { user: "octocat", upstream: "github" });
      expect(pagesOf(first)).toEqual(["consent", "github-login", "callback"]);
      // The client opens the browser at /authorize again (Sec-Fetch-Site: none): no consent page.
      const again = await clickThrough(page, authorizeUrl(t.url, client, { state: "again" }), { user: "octocat", upstream: "github" });
      expect(pagesOf(again)).toEqual(["github-login", "callback"]);
      expect(again.callback.searchParams.get("code")).toEqual(expect.any(String));

      // A page of another site sends the browser to /authorize for the same client: the consent page.
      const lure = `${otherSiteUrl}?go=${encodeURIComponent(authorizeUrl(t.url, client, { state: "lured" }).href)}`;
      await page.goto(lure);
      // Wherever it lands first after the lure and /authorize: the consent page, or (silently) GitHub.
      await page.waitForURL((url) => !url.href.startsWith(otherSiteUrl) && url.pathname !== "/authorize");
      const landed = new URL(page.url());
      expect(landed.origin + landed.pathname).toBe(`${t.url}/consent`);
      await expect(page.locator('form input[name="csrf"]').count()).resolves.toBe(1);
      await screenshot(page, "consent-after-cross-site-navigation");
    } finally {
      await context.close();
    }
  }, 60_000);
});
