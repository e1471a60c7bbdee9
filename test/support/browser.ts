// Headless Chromium for browser tests: Debian's Chromium driven by playwright-core (no browser
// download; never `npx playwright install`). Its headless shell (package chromium-headless-shell,
// the same Chromium release) when installed: it is what Playwright itself runs for headless
// browsers, and it starts in a third of the time and renders with about half the CPU of the full
// browser's headless mode (the browser tests: 43–49 s → 29 s on this machine). Else the full
// browser (package chromium). One browser per test file, one context per
// "user" (own cookies). playwright starts every browser with a fresh --user-data-dir of its own
// in the temp folder and deletes it on close (it refuses the flag in `args`, which is why it is
// not passed here). Screenshots go to test-output/screenshots/.
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect } from "@jest/globals";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";
import { CallbackServer } from "./mcp-oauth-client.ts";
import { startBroker, type TestBroker } from "./start-broker.ts";

const HEADLESS_SHELL = "/usr/lib/chromium/chromium-headless-shell";
export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? (existsSync(HEADLESS_SHELL) ? HEADLESS_SHELL : "/usr/bin/chromium");
export const SCREENSHOT_DIR = path.resolve("test-output", "screenshots");

export function chromiumAvailable(): boolean {
  return existsSync(CHROMIUM_PATH);
}

/** `describe`, or `describe.skip` with a printed notice when Chromium is not installed. */
export function describeWithChromium(name: string, fn: () => void): void {
  if (chromiumAvailable()) {
    describe(name, fn);
    return;
  }
  process.stdout.write(
    `\n[notice] Chromium not found at ${CHROMIUM_PATH}: skipping "${name}" (apt-get install -y chromium-headless-shell, or set CHROMIUM_PATH).\n`,
  );
  describe.skip(name, fn);
}

export async function launchChromium(): Promise<Browser> {
  if (!chromiumAvailable()) {
    throw new Error(`Chromium not found at ${CHROMIUM_PATH}: run "apt-get update && apt-get install -y chromium-headless-shell" (or set CHROMIUM_PATH).`);
  }
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    // headless: true makes playwright pass --headless itself.
    headless: true,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

export interface ChromiumSuite {
  /** The file's browser (set once its beforeAll has run). */
  readonly browser: Browser;
  /**
   * Runs `stop` in afterAll, after the browser is closed, in reverse order of registration. The
   * browser goes first: Chromium may hold sockets to the servers it visited (preconnected ones
   * too, that never carry a request), and a graceful server stop waits for those.
   */
  cleanup(stop: () => Promise<unknown>): void;
}

/** One Chromium for the calling test file (registers its beforeAll/afterAll). */
export function useChromium(): ChromiumSuite {
  let browser: Browser | undefined;
  const stops: Array<() => Promise<unknown>> = [];
  beforeAll(async () => {
    if (chromiumAvailable()) browser = await launchChromium();
  }, 30_000);
  afterAll(async () => {
    await browser?.close();
    for (const stop of stops.reverse()) await stop();
  }, 30_000);
  return {
    get browser() {
      if (!browser) throw new Error("Chromium is not running (not installed, or used outside a test)");
      return browser;
    },
    cleanup: (stop) => void stops.push(stop),
  };
}

/** A broker (demo mode) and a client's callback server for a describe block, stopped with its Chromium. */
export function useBrokerAndCallback(suite: ChromiumSuite): { readonly broker: TestBroker; readonly callback: CallbackServer } {
  const env = {} as { broker: TestBroker; callback: CallbackServer };
  beforeAll(async () => {
    [env.broker, env.callback] = await Promise.all([startBroker(), new CallbackServer().start()]);
    suite.cleanup(() => env.broker.stop());
    suite.cleanup(() => env.callback.close());
  }, 30_000);
  return env;
}

export const DESKTOP = { viewport: { width: 1000, height: 800 } } as const;
/** An iPhone-sized screen: 390 CSS pixels wide. */
export const PHONE = { viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, isMobile: true, hasTouch: true } as const;

/** A new "user": a browser context with its own cookies. */
export async function newUser(browser: Browser, screen: typeof DESKTOP | typeof PHONE = DESKTOP): Promise<BrowserContext> {
  const context = await browser.newContext(screen);
  // Chromium asks every origin for /favicon.ico, the client's loopback callback server too, which
  // takes any request there for the authorization response (and loses the real one).
  await context.route("**/favicon.ico", (route) => route.fulfill({ status: 204 }));
  return context;
}

/** Saves a full-page screenshot as test-output/screenshots/<name>.png and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const file = path.join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  return file;
}

/** The running Jest test's name as a file-name prefix. */
export function testSlug(): string {
  const name = expect.getState().currentTestName ?? "test";
  return name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-|-$/g, "")
    .slice(0, 90);
}

export type PageKind = "consent" | "connect-step" | "demo-login" | "github-login" | "callback";

export interface ClickThroughOptions {
  /** The user name typed at the upstream login. */
  readonly user: string;
  readonly decision?: "Allow" | "Deny";
  /** Which login page is expected upstream: the demo IdP's (also the standalone OIDC issuer) or GitHub's. */
  readonly upstream?: "demo" | "github";
  /** The GitHub account connected at the consent page's connect step (connected accounts). */
  readonly connectGitHubAs?: string;
  /** Screenshot prefix; default: the running test's name. */
  readonly name?: string;
  readonly timeoutMs?: number;
  /** Where the flow ends; default: the `redirect_uri` of `url`. */
  readonly redirectUri?: string;
  /** Called on each page before it is answered (and on the final one): checks of the test. */
  readonly inspect?: (page: Page, kind: PageKind) => Promise<void>;
}

export interface VisitedPage {
  readonly kind: PageKind;
  readonly url: string;
  /** The page's visible text, as the user read it. */
  readonly text: string;
}

/**
 * Every page of every flow as a screenshot costs ~5 s of CPU per run: by default only the page a
 * flow stopped on is kept; MAB_SCREENSHOTS=all keeps them all, to look at the pages by eye.
 */
const everyPage = process.env.MAB_SCREENSHOTS === "all";

export interface ClickThroughResult {
  /** Where the browser ended: the client's redirect URI with code or error. */
  readonly callback: URL;
  /** Every page the user saw, in order. */
  readonly pages: ReadonlyArray<VisitedPage>;
}

async function has(page: Page, selector: string): Promise<boolean> {
  return (await page.locator(selector).count()) > 0;
}

async function identify(page: Page, redirectUri: string): Promise<PageKind | null> {
  if (page.url().startsWith(redirectUri)) return "callback";
  if (await has(page, "#connect-heading")) return "connect-step";
  if (await has(page, 'form input[name="csrf"]')) return "consent";
  if (await has(page, "#username")) {
    if ((await page.getByRole("button", { name: "Sign in", exact: true }).count()) > 0) return "demo-login";
    if ((await page.getByRole("button", { name: "Authorize", exact: true }).count()) > 0) return "github-login";
  }
  return null;
}

/**
 * Leads `page` through an authorization request as a user does: opens `url` (the client's
 * authorization URL), answers the consent page, signs in upstream, and returns once the browser
 * reaches the client's redirect URI (by default the URL's `redirect_uri`). A consent the browser
 * already gave, or an upstream session still open, skips those pages. When it fails, the page it
 * failed on is saved as <name>-failed.png (every page as <name>-<n>-<kind>.png with
 * MAB_SCREENSHOTS=all).
 */
export async function clickThrough(page: Page, url: string | URL, options: ClickThroughOptions): Promise<ClickThroughResult> {
  const name = options.name ?? testSlug();
  try {
    return await walkPages(page, url, options, name);
  } catch (err) {
    const shot = await screenshot(page, `${name}-failed`).catch(() => "none: the page is gone");
    throw new Error(`${(err as Error).message}\n(screenshot: ${shot})`, { cause: err });
  }
}

/** The connect step: the first account not connected yet, or Continue once all are. */
async function connectOrContinue(page: Page): Promise<void> {
  const connect = page.locator('button[value^="connect:"]');
  if ((await connect.count()) > 0) await connect.first().click();
  else await page.locator("#continue").click();
}

async function walkPages(page: Page, url: string | URL, options: ClickThroughOptions, name: string): Promise<ClickThroughResult> {
  const start = new URL(url);
  const redirectUri = options.redirectUri ?? start.searchParams.get("redirect_uri");
  if (!redirectUri) throw new Error(`clickThrough: ${start.href} has no redirect_uri`);
  const upstream = options.upstream ?? "demo";
  const timeout = options.timeoutMs ?? 15_000;
  const pages: VisitedPage[] = [];

  await page.goto(start.href, { timeout });
  for (let n = 1; n <= 8; n++) {
    const here = page.url();
    const kind = await identify(page, redirectUri);
    if (everyPage) await screenshot(page, `${name}-${n}-${kind ?? "unexpected"}`);
    const text =
      (await page
        .locator("body")
        .textContent()
        .catch(() => "")) ?? "";
    if (!kind) throw new Error(`clickThrough stopped at ${here}: not a page it knows:\n${text.slice(0, 400)}`);
    pages.push({ kind, url: here, text });
    await options.inspect?.(page, kind);
    if (kind === "callback") return { callback: new URL(here), pages };
    // GitHub's login is the connect step's when the user signed in elsewhere.
    const connecting = kind === "github-login" && upstream !== "github" && options.connectGitHubAs !== undefined;
    if ((kind === "demo-login" && upstream !== "demo") || (kind === "github-login" && upstream !== "github" && !connecting)) {
      throw new Error(`clickThrough: expected the ${upstream} login, got ${kind} at ${here}`);
    }
    const act =
      kind === "consent"
        ? () => page.getByRole("button", { name: options.decision ?? "Allow", exact: true }).click()
        : kind === "connect-step"
          ? () => connectOrContinue(page)
          : async () => {
              await page.getByLabel(kind === "demo-login" ? "User name" : "Username").fill(connecting ? options.connectGitHubAs! : options.user);
              await page.getByRole("button", { name: kind === "demo-login" ? "Sign in" : "Authorize", exact: true }).click();
            };
    // Every answer leaves this URL (a redirect chain, or a POST to another path).
    await Promise.all([page.waitForURL((u) => u.href !== here, { timeout, waitUntil: "load" }), act()]);
  }
  throw new Error(`clickThrough: no end after ${pages.length} pages: ${pages.map((p) => p.url).join(" → ")}`);
}

/**
 * The `authorize` callback of connectWithOAuth: opens each authorization URL in a new tab of
 * `context` and clicks through it. Returns what each run saw.
 */
export function authorizeInBrowser(
  context: BrowserContext,
  options: ClickThroughOptions,
): { authorize: (url: URL) => Promise<void>; runs: ClickThroughResult[] } {
  const runs: ClickThroughResult[] = [];
  let count = 0;
  return {
    runs,
    async authorize(url: URL) {
      const page = await context.newPage();
      try {
        count++;
        const name = options.name ?? testSlug();
        runs.push(await clickThrough(page, url, { ...options, name: count === 1 ? name : `${name}-run${count}` }));
      } finally {
        await page.close();
      }
    },
  };
}
