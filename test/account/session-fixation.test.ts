// Session fixation: an attacker opens /account, copies its browser session cookie (mab_session and
// its signature) into the victim's browser, and waits for the victim to sign in. Every sign-in (at
// /account, or the upstream login of a client's authorization) must give the browser a new
// session id, so the attacker's copy never sees the victim's connected apps and its CSRF token
// revokes nothing. What the victim's browser itself needs across the renewal stays: the consent
// it just gave, and the authorization it is in the middle of. Over real HTTP against a broker in
// demo mode.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { HttpBrowser, answerAs, answerSwitchingTo } from "../support/http-browser.ts";
import { authorize, redeemCode, registerClient, type RegisteredTestClient } from "../support/oauth-flow.ts";
import { authorizeUrl, decide, openConsent } from "../support/oauth-client.ts";
import { mcpStatus } from "../support/mcp-probe.ts";
import { AccountVisitor, readAccountPage, type AccountView } from "./account-visitor.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

/** The attacker's browser after opening /account: its session cookies and the page's CSRF token. */
async function attackerAtAccount(): Promise<{ browser: HttpBrowser; cookies: Record<string, string>; csrf: string }> {
  const browser = new HttpBrowser();
  const page = await new AccountVisitor(t.url, browser).open();
  const cookies = browser.cookies(t.url);
  expect(Object.keys(cookies).sort()).toEqual(["mab_session", "mab_session.sig"]);
  return { browser, cookies, csrf: page.csrf };
}

/** A victim's browser carrying the attacker's session cookies. */
function plantedBrowser(cookies: Record<string, string>): HttpBrowser {
  const browser = new HttpBrowser();
  browser.plant(t.url, cookies);
  return browser;
}

async function view(browser: HttpBrowser): Promise<AccountView> {
  const res = await browser.request(`${t.url}/account`);
  return readAccountPage(res.status, res.headers, await res.text());
}

/**
 * A connected app of `user`: the flow in a browser of its own (or in `browser`), the code
 * exchanged; its access token.
 */
async function connectedApp(
  user: string,
  options: { browser?: HttpBrowser; name?: string } = {},
): Promise<{ client: RegisteredTestClient; accessToken: string }> {
  const client = await registerClient(t.url, { client_name: options.name ?? `${user}'s app` });
  const token = await redeemCode(t.url, client, await authorize(t.url, client, { user, browser: options.browser }));
  expect(token.status).toBe(200);
  return { client, accessToken: token.body.access_token as string };
}

/** What the attacker's copy of the session can do once the victim has signed in. */
async function expectAttackerGetsNothing(attacker: { browser: HttpBrowser; csrf: string }, victimToken: string): Promise<void> {
  const seen = await view(attacker.browser);
  expect(seen.signedInAs).toBeNull();
  expect(seen.apps).toEqual([]);
  const revokeAll = await attacker.browser.request(`${t.url}/account`, { form: { action: "revoke_all", csrf: attacker.csrf } });
  expect(revokeAll.status).toBe(403);
  expect(await mcpStatus(t.url, victimToken)).toBe(200);
}

describe("a session id planted in the victim's browser", () => {
  it("is replaced when the victim signs in at /account: the attacker's copy lists and revokes nothing", async () => {
    const attacker = await attackerAtAccount();
    const { accessToken } = await connectedApp("vera");
    const victimBrowser = plantedBrowser(attacker.cookies);

    const { page } = await new AccountVisitor(t.url, victimBrowser).signIn("vera");
    expect(page.signedInAs).toBe("vera");
    expect(page.apps.map((a) => a.name)).toEqual(["vera's app"]);

    await expectAttackerGetsNothing(attacker, accessToken);
    expect(victimBrowser.cookies(t.url).mab_session).not.toBe(attacker.cookies.mab_session);
    // The victim's own page still works, with its own CSRF token.
    expect((await view(victimBrowser)).apps).toHaveLength(1);
  });

  it("is replaced when the victim signs in through a client's authorization", async () => {
    const attacker = await attackerAtAccount();
    const victimBrowser = plantedBrowser(attacker.cookies);
    const { accessToken } = await connectedApp("wendy", { browser: victimBrowser, name: "Wendy's editor" });
    await expectAttackerGetsNothing(attacker, accessToken);
    expect(victimBrowser.cookies(t.url).mab_session).not.toBe(attacker.cookies.mab_session);
    // The sign-in opened the connected-apps page for the victim, and only for the victim.
    expect((await view(victimBrowser)).signedInAs).toBe("wendy");
  });

  it("carries none of the attacker's remembered consents into the victim's session", async () => {
    // The attacker approves its own client in the planted session (and never signs in).
    const attacker = await attackerAtAccount();
    const evil = await registerClient(t.url, { client_name: "Attacker's app" });
    const approval = await openConsent(authorizeUrl(t.url, evil), attacker.browser);
    expect((await decide(approval, "allow", attacker.browser)).status).toBe(303);

    const victimBrowser = plantedBrowser(attacker.cookies);
    const client = await registerClient(t.url, { client_name: "Xena's editor" });
    await authorize(t.url, client, { user: "xena", browser: victimBrowser });

    // In the victim's browser the attacker's client is asked about again, its own one is not.
    const firstHop = async (c: RegisteredTestClient) => {
      const res = await victimBrowser.request(authorizeUrl(t.url, c).href);
      return new URL(res.headers.get("location")!).pathname === "/consent" ? "consent" : "skipped";
    };
    expect(await firstHop(evil)).toBe("consent");
    expect(await firstHop(client)).toBe("skipped");
  });
});

describe("what survives the new session id", () => {
  it("an authorization the browser is in the middle of completes after a sign-in at /account", async () => {
    const browser = new HttpBrowser();
    const client = await registerClient(t.url, { client_name: "Yuri's editor" });
    const pending = await openConsent(authorizeUrl(t.url, client, { state: "mid-flight" }), browser);
    const before = browser.cookies(t.url).mab_session;
    await new AccountVisitor(t.url, browser).signIn("yuri");
    expect(browser.cookies(t.url).mab_session).not.toBe(before);

    const res = await decide(pending, "allow", browser);
    expect(res.status).toBe(303);
    const back = await browser.walk(res.headers.get("location")!, client.redirect_uri, answerAs("yuri"));
    expect(back.searchParams.get("code")).toEqual(expect.any(String));
    expect(back.searchParams.get("state")).toBe("mid-flight");
  });

  it("a sign-in at /account under way completes after a client's authorization signed in the same browser", async () => {
    const browser = new HttpBrowser();
    const visitor = new AccountVisitor(t.url, browser);
    const { csrf } = await visitor.open();
    const started = await visitor.post({ action: "sign_in", csrf });
    const accountCallback = await browser.walk(started.headers.get("location")!, `${t.url}/oauth/callback`, answerAs("bea"));
    // Meanwhile, in another tab, a client's authorization signs bea in: a new session id.
    const before = browser.cookies(t.url).mab_session;
    const client = await registerClient(t.url, { client_name: "Bea's editor" });
    await authorize(t.url, client, { user: "bea", browser });
    expect(browser.cookies(t.url).mab_session).not.toBe(before);

    const back = await browser.request(accountCallback.href);
    expect(back.status).toBe(302);
    expect(back.headers.get("location")).toBe(`${t.url}/account`);
    expect((await view(browser)).signedInAs).toBe("bea");
  });

  it("the consents of the same person, across a second sign-in; not those of another person", async () => {
    const browser = new HttpBrowser();
    const client = await registerClient(t.url, { client_name: "Zoe's editor" });
    await authorize(t.url, client, { user: "zoe", browser });
    const firstHop = async () => {
      const res = await browser.request(authorizeUrl(t.url, client).href);
      return new URL(res.headers.get("location")!).pathname === "/consent" ? "consent" : "skipped";
    };
    expect(await firstHop()).toBe("skipped");

    // zoe signs in again (the account page's sign-in): a new session id, her consent kept.
    const sessionBefore = browser.cookies(t.url).mab_session;
    await signInAgain(browser, "zoe");
    expect(browser.cookies(t.url).mab_session).not.toBe(sessionBefore);
    expect(await firstHop()).toBe("skipped");

    // Someone else signs in in the same browser: zoe's consent is not theirs.
    await signInAgain(browser, "adam");
    expect(await firstHop()).toBe("consent");
  });
});

/** A sign-in at /account, asking the IdP for a fresh login, in a browser that may already be signed in. */
async function signInAgain(browser: HttpBrowser, user: string): Promise<void> {
  const page = await view(browser);
  const res = await browser.request(`${t.url}/account`, { form: { action: "sign_in", csrf: page.csrf, select_account: "1" } });
  expect(res.status).toBe(303);
  const callbackUrl = await browser.walk(res.headers.get("location")!, `${t.url}/oauth/callback`, answerSwitchingTo(user));
  const back = await browser.request(callbackUrl.href);
  expect(back.status).toBe(302);
  expect((await view(browser)).signedInAs).toBe(user);
}
