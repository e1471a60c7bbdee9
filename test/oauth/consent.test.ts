// The consent page over HTTP: what it shows, its hardening (CSRF bound to the browser
// session, once only, only the starting browser, framing, cookies), Allow, Deny and the
// remembered-consent rule. The service it names, who is signed in ("Not you?"), how
// long access lasts, and no hot-linked logo. consent-browser.test.ts drives the same page in Chromium.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { ClientRegistry } from "../../src/grants/clients.ts";
import { parseClientMetadata } from "../../src/grants/client-metadata.ts";
import { accessDurationText, humanizeSeconds, initialOf } from "../../src/views/consent-page.ts";
import { answerAs, answerSwitchingTo, HttpBrowser } from "../support/http-browser.ts";
import { freePort, startBroker, type TestBroker } from "../support/start-broker.ts";
import {
  authorizeUrl,
  browserSessionIdOf,
  countRows,
  decide,
  openConsent,
  readConsent,
  redirectParams,
  registerTestClient,
  send,
  type ConsentForm,
  type TestClient,
  tamper,
} from "../support/oauth-client.ts";

let t: TestBroker;
let client: TestClient;
let upstreamAuthorize: string;
beforeAll(async () => {
  t = await startBroker({ TRUST_PROXY: "true" });
  client = await registerTestClient(t.url, {
    client_name: "Acme Assistant",
    client_uri: "https://acme.example.com",
    logo_uri: "https://acme.example.com/logo.png",
    redirect_uris: ["http://127.0.0.1:7777/callback", "http://localhost:7778/other"],
  });
  const idp = await send(`${t.url}/demo-idp/.well-known/openid-configuration`);
  upstreamAuthorize = idp.json!.authorization_endpoint as string;
});
afterAll(async () => t.stop());

const db = () => t.broker.database.db;
const txStatus = async (id: string) => (await db().authTransaction.findUniqueOrThrow({ where: { id } })).status;
const consentFor = (overrides: Record<string, string | undefined> = {}, browser = new HttpBrowser()) =>
  openConsent(authorizeUrl(t.url, client, overrides), browser);

describe("what the page shows", () => {
  let form: ConsentForm;
  beforeAll(async () => {
    form = await consentFor({ scope: "mcp offline_access" });
  });

  it("names the service prominently, the self-registered client by where its code goes (its name as a claim), its id, website and the host it returns to", () => {
    const host = new URL(t.url).host;
    // A loopback redirect URI: an app on this computer; the name is only what it calls itself.
    expect(form.html).toMatch(
      new RegExp(
        `<h1><span id="vouching-party">An app on this computer</span> wants to connect to <span id="resource-name">${host.replace(/\./g, "\\.")}</span></h1>`,
      ),
    );
    expect(form.html).toContain('<span id="name-claim">It calls itself “<span id="client-name">Acme Assistant</span>”</span> and will return to');
    expect(form.html).toMatch(/<div class="avatar c[0-7]" id="client-initial" aria-hidden="true">\?<\/div>/);
    expect(form.html).toContain("Allow <strong>this app</strong> to connect?");
    expect(form.html).toContain(client.client_id);
    expect(form.html).toContain("https://acme.example.com");
    expect(form.html).toMatch(/<strong id="redirect-host">127\.0\.0\.1:7777<\/strong>/);
  });

  it("never hot-links the client's logo: the person's browser contacts no host the client chose", () => {
    expect(form.html).not.toContain("<img");
    expect(form.html).not.toContain("logo.png");
  });

  it("says how long the access lasts, from the default session limits", () => {
    expect(form.html).toContain(
      '<p class="muted" id="access-duration">Access lasts until you revoke it; it ends after 1 day unused and after 30 days at most.</p>',
    );
  });

  it("says plainly that a dynamically registered client is unverified", () => {
    expect(form.html).toMatch(/Unverified/);
    expect(form.html).toMatch(/registered itself/);
  });

  it("lists the scopes and names the identity provider", () => {
    expect(form.html).toMatch(/<ul class="scopes"><li>[^<]+<\/li><li>[^<]+<\/li><\/ul>/);
    expect(form.html).toContain('<strong id="provider-name">Demo identity provider</strong>');
  });

  it("has exactly two buttons, Deny and Allow, posting the form with the transaction and CSRF token", () => {
    expect([...form.html.matchAll(/<button[^>]*>([^<]*)<\/button>/g)].map((m) => m[1])).toEqual(["Deny", "Allow"]);
    expect(form.html).toMatch(/<form method="post" action="consent">/);
    expect(form.transaction).toMatch(/^[A-Za-z0-9_-]{20,}$/);
    expect(form.csrf).toMatch(/^[A-Za-z0-9_-]{40,}$/);
  });

  it("is hardened against framing and caching", () => {
    expect(form.headers.get("content-security-policy")).toMatch(/frame-ancestors 'none'/);
    // No image from a host the client chose can load, whatever the page says.
    expect(form.headers.get("content-security-policy")).toMatch(/img-src 'self' data:;/);
    expect(form.headers.get("x-frame-options")).toBe("DENY");
    expect(form.headers.get("cache-control")).toBe("no-store");
    expect(form.headers.get("content-type")).toMatch(/^text\/html/);
  });

  it("does not call an operator-registered client unverified", async () => {
    const { client: manual } = await new ClientRegistry(db()).register(
      parseClientMetadata({ redirect_uris: ["https://ops.example.com/cb"], token_endpoint_auth_method: "none", client_name: "Ops tool" }, "manual"),
      "manual",
    );
    const page = await openConsent(authorizeUrl(t.url, { client_id: manual.id, redirect_uri: "https://ops.example.com/cb" }));
    expect(page.html).toContain("Ops tool");
    expect(page.html).not.toMatch(/Unverified/);
    expect(page.html).toMatch(/id="redirect-host">ops\.example\.com</);
  });

  it("escapes what the client registered", async () => {
    const evil = await registerTestClient(t.url, { client_name: '<script>alert("x")</script><img src=x onerror=alert(1)>' });
    const page = await openConsent(authorizeUrl(t.url, evil));
    expect(page.html).not.toContain("<script>alert");
    expect(page.html).not.toContain("<img src=x");
    expect(page.html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
  });

  it("shows a neutral initial for a client without a name", async () => {
    const plain = await registerTestClient(t.url, { client_name: undefined });
    const page = await openConsent(authorizeUrl(t.url, plain));
    expect(page.html).not.toContain("<img");
    expect(page.html).toContain('<span id="name-claim">It gives no name</span>');
    expect(page.html).toMatch(/id="client-initial" aria-hidden="true">\?</);
  });

  it("does not name anyone as signed in while this browser has not signed in", () => {
    expect(form.html).not.toContain("signed in as");
    expect(form.html).not.toContain("allow_other_account");
  });
});

describe("the words for durations and initials", () => {
  it.each([
    [86400, "1 day"],
    [43200, "12 hours"],
    [5400, "90 minutes"],
    [2592000, "30 days"],
    [3600, "1 hour"],
    [90000, "25 hours"],
    [45, "45 seconds"],
    [1, "1 second"],
    [3 * 86400 + 3600, "about 3 days"],
    [2 * 3600 + 1, "about 2 hours"],
  ])("%i seconds is %j", (seconds, words) => {
    expect(humanizeSeconds(seconds)).toBe(words);
  });

  it("leaves out the idle limit when it can never come first", () => {
    expect(accessDurationText(86400, 86400)).toBe("Access lasts until you revoke it; it ends after 1 day at most.");
    expect(accessDurationText(3600, 86400)).toBe("Access lasts until you revoke it; it ends after 1 hour unused and after 1 day at most.");
  });

  it.each([
    ["Acme", "A"],
    ["claude", "C"],
    ["  [beta] tool", "B"],
    ["Ökobot", "Ö"],
    ["42 agents", "4"],
    ["<>", "?"],
    [null, "?"],
  ])("the initial of %j is %j", (name, initial) => {
    expect(initialOf(name)).toBe(initial);
  });
});

describe("a configured service name and session limits", () => {
  let named: TestBroker;
  beforeAll(async () => {
    named = await startBroker({ RESOURCE_NAME: "Acme <Docs>", SESSION_IDLE_TIMEOUT_SECONDS: "5400", SESSION_MAX_AGE_SECONDS: "43200" });
  });
  afterAll(async () => named.stop());

  it("names RESOURCE_NAME (escaped) and states SESSION_IDLE_TIMEOUT_SECONDS and SESSION_MAX_AGE_SECONDS in words", async () => {
    const c = await registerTestClient(named.url, { client_name: "Claude" });
    const page = await openConsent(authorizeUrl(named.url, c));
    expect(page.html).toContain(
      '<span id="vouching-party">An app on this computer</span> wants to connect to <span id="resource-name">Acme &lt;Docs&gt;</span>',
    );
    expect(page.html).toContain("<title>An app on this computer wants to connect to Acme &lt;Docs&gt;</title>");
    expect(page.html).toContain('It calls itself “<span id="client-name">Claude</span>”</span>');
    expect(page.html).toContain("Access lasts until you revoke it; it ends after 90 minutes unused and after 12 hours at most.");
  });
});

describe("the signed-in user, and Not you?", () => {
  // A client of its own: the remembered consents made here do not meet the other tests'.
  let app: TestClient;
  beforeAll(async () => {
    app = await registerTestClient(t.url, {
      client_name: "Signed-in test app",
      redirect_uris: ["http://127.0.0.1:7777/callback", "http://localhost:7778/other"],
    });
  });
  const consentFor = (overrides: Record<string, string | undefined>, browser: HttpBrowser) => openConsent(authorizeUrl(t.url, app, overrides), browser);
  const sessionOf = async (transaction: string) => (await db().authTransaction.findUniqueOrThrow({ where: { id: transaction } })).browserSessionId;

  /** A browser that connected the app once (scope mcp) as `user`, through the demo IdP. */
  async function signedInBrowser(user: string): Promise<HttpBrowser> {
    const browser = new HttpBrowser();
    const back = await browser.walk(authorizeUrl(t.url, app, { scope: "mcp" }).href, app.redirect_uri, answerAs(user));
    expect(back.searchParams.get("code")).toEqual(expect.any(String));
    return browser;
  }

  it("names who signed in last in this browser, with the provider, and offers Not you? in the same form", async () => {
    const browser = await signedInBrowser("alice");
    // Another scope: the remembered consent (scope mcp) would skip the page.
    const form = await consentFor({ scope: "mcp offline_access" }, browser);
    expect(form.html).toContain('You are signed in as <strong id="signed-in-as">alice</strong> (Demo identity provider).');
    const buttons = [...form.html.matchAll(/<button type="submit" name="decision" value="([a-z_]+)"[^>]*>([^<]*)<\/button>/g)].map((m) => [m[1], m[2]]);
    expect(buttons).toEqual([
      ["allow_other_account", "Not you? Allow with another account"],
      ["deny", "Deny"],
      ["allow", "Allow"],
    ]);
    // All three in the one CSRF-protected form.
    const inForm = /<form method="post" action="consent">([\s\S]*)<\/form>/.exec(form.html)![1]!;
    expect(inForm.match(/<button /g)).toHaveLength(3);
  });

  it("Not you?: forgets this browser's identity and consents, approves, and asks the IdP for a fresh login", async () => {
    const browser = await signedInBrowser("alice");
    const form = await consentFor({ scope: "mcp offline_access", state: "other-account" }, browser);
    const sid = await sessionOf(form.transaction);
    expect(await t.broker.services.grants.browserIdentities.of(sid)).toMatchObject({ subject: "demo:alice", login: "alice", provider: "demo" });
    expect(await db().consent.count({ where: { browserSessionId: sid, scope: "mcp" } })).toBe(1);

    const res = await decide(form, "allow_other_account", browser);
    expect(res.status).toBe(303);
    const upstream = new URL(res.headers.get("location")!);
    expect(upstream.href.startsWith(`${upstreamAuthorize}?`)).toBe(true);
    // OIDC Core §3.1.2.1: the demo IdP (like any OIDC issuer but Google) shows its login form again.
    expect(upstream.searchParams.get("prompt")?.split(" ")).toContain("login");
    expect(await txStatus(form.transaction)).toBe("approved");
    expect(await t.broker.services.grants.browserIdentities.of(sid)).toBeNull();
    expect(await db().browserIdentity.count({ where: { browserSessionId: sid } })).toBe(0);
    // The consent alice gave is gone; the one given now is remembered.
    expect(await db().consent.findMany({ where: { browserSessionId: sid }, select: { scope: true } })).toEqual([{ scope: "mcp offline_access" }]);

    // The upstream login asks again (the IdP's session of alice does not carry over): bob signs in,
    // and the browser gets a new session id with him.
    const back = await browser.walk(upstream.href, app.redirect_uri, answerSwitchingTo("bob"));
    expect(back.searchParams.get("state")).toBe("other-account");
    const bobs = browserSessionIdOf(browser, t.url)!;
    expect(bobs).not.toBe(sid);
    expect(await t.broker.services.grants.browserIdentities.of(sid)).toBeNull();
    expect(await t.broker.services.grants.browserIdentities.of(bobs)).toMatchObject({ subject: "demo:bob", login: "bob" });
    // Only the consent bob completed is remembered, under his session.
    expect(await db().consent.findMany({ where: { browserSessionId: bobs }, select: { scope: true } })).toEqual([{ scope: "mcp offline_access" }]);
    expect(await db().consent.count({ where: { browserSessionId: sid } })).toBe(0);
    const next = await consentFor({ redirect_uri: "http://localhost:7778/other" }, browser);
    expect(next.html).toContain('<strong id="signed-in-as">bob</strong>');
  });

  it("with a forged CSRF token, Not you? forgets nothing and approves nothing", async () => {
    const browser = await signedInBrowser("carol");
    const form = await consentFor({ scope: "mcp offline_access" }, browser);
    const sid = await sessionOf(form.transaction);
    const res = await decide({ ...form, csrf: tamper(form.csrf) }, "allow_other_account", browser);
    expect(res.status).toBe(400);
    expect(await txStatus(form.transaction)).toBe("pending");
    expect(await t.broker.services.grants.browserIdentities.of(sid)).toMatchObject({ login: "carol" });
    expect(await db().consent.count({ where: { browserSessionId: sid } })).toBe(1);
  });
});

describe("the browser session cookie", () => {
  it("is HttpOnly and SameSite=Lax (plain http on loopback: no Secure)", async () => {
    const res = await send(authorizeUrl(t.url, client).href);
    const cookie = res.headers.getSetCookie().find((c) => c.startsWith("mab_session="));
    expect(cookie).toBeDefined();
    expect(cookie).toMatch(/; httponly/i);
    expect(cookie).toMatch(/; samesite=lax/i);
    expect(cookie).not.toMatch(/; secure/i);
  });

  it("is Secure with the __Host- prefix when PUBLIC_URL is https", async () => {
    const port = await freePort();
    const b = await startBroker({ PORT: String(port), PUBLIC_URL: `https://127.0.0.1:${port}`, TRUST_PROXY: "true" });
    try {
      const listen = `http://127.0.0.1:${port}`;
      const c = await registerTestClient(listen);
      const res = await send(authorizeUrl(listen, c, { resource: `https://127.0.0.1:${port}/mcp` }).href);
      expect(res.status).toBe(302);
      const cookies = res.headers.getSetCookie().filter((v) => v.startsWith("__Host-mab_session"));
      expect(cookies.length).toBeGreaterThan(0);
      for (const cookie of cookies) {
        expect(cookie).toMatch(/; secure/i);
        expect(cookie).toMatch(/; httponly/i);
        expect(cookie).toMatch(/; samesite=lax/i);
        expect(cookie).toMatch(/; path=\//i);
        expect(cookie).not.toMatch(/; domain=/i);
      }
    } finally {
      await b.stop();
    }
  });
});

describe("Deny", () => {
  it("sends the browser back to the client with access_denied, state and iss, and creates no grant", async () => {
    const form = await consentFor({ state: "deny-state" });
    const before = await countRows(db());
    const res = await decide(form, "deny", form.browser);
    expect(res.status).toBe(303);
    const { url, params } = redirectParams(res);
    expect(url.origin + url.pathname).toBe(client.redirect_uri);
    expect(params).toEqual({ error: "access_denied", error_description: expect.any(String), state: "deny-state", iss: t.url });
    expect(await txStatus(form.transaction)).toBe("denied");
    const after = await countRows(db());
    expect({ ...after, auditEvent: before.auditEvent }).toEqual(before);
    expect(await db().consent.count({ where: { clientId: client.client_id } })).toBe(0);
  });
});

describe("Allow", () => {
  it("approves the transaction and sends the browser to the upstream identity provider", async () => {
    const form = await consentFor({ state: "allow-state" });
    const res = await decide(form, "allow", form.browser);
    expect(res.status).toBe(303);
    expect(res.headers.get("location")!.startsWith(`${upstreamAuthorize}?`)).toBe(true);
    const tx = await db().authTransaction.findUniqueOrThrow({ where: { id: form.transaction } });
    expect(tx.status).toBe("approved");
    expect(tx.upstreamState).toBe(new URL(res.headers.get("location")!).searchParams.get("state"));
  });
});

describe("hardening", () => {
  it("accepts a decision once only", async () => {
    const form = await consentFor();
    expect((await decide(form, "allow", form.browser)).status).toBe(303);
    for (const decision of ["allow", "deny"]) {
      const again = await decide(form, decision, form.browser);
      expect(again.status).toBe(400);
      expect(again.headers.get("location")).toBeNull();
    }
    expect(await txStatus(form.transaction)).toBe("approved");
    // The page itself is gone too.
    expect((await form.browser.request(form.pageUrl)).status).toBe(400);
  });

  it("accepts exactly one of several simultaneous decisions", async () => {
    const form = await consentFor();
    const answers = await Promise.all(["allow", "deny", "allow", "deny", "allow", "allow"].map((d) => decide(form, d, form.browser)));
    expect(answers.filter((r) => r.status === 303)).toHaveLength(1);
    expect(answers.filter((r) => r.status === 400)).toHaveLength(5);
    expect(["approved", "denied"]).toContain(await txStatus(form.transaction));
  });

  it("refuses a wrong, missing or borrowed CSRF token, and the transaction stays pending", async () => {
    const form = await consentFor();
    const other = await consentFor({}, form.browser);
    const forged = [tamper(form.csrf), "", other.csrf];
    for (const csrf of forged) {
      const res = await decide({ ...form, csrf }, "allow", form.browser);
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
    }
    expect(await txStatus(form.transaction)).toBe("pending");
    expect((await decide(form, "allow", form.browser)).status).toBe(303);
  });

  it("lets only the browser that started the request see and answer it", async () => {
    const form = await consentFor();
    const stranger = new HttpBrowser();
    expect((await stranger.request(form.pageUrl)).status).toBe(400);
    // Without a session, and with a session of its own (from an /authorize of its own).
    expect((await decide(form, "allow", stranger)).status).toBe(400);
    await consentFor({}, stranger);
    expect((await decide(form, "allow", stranger)).status).toBe(400);
    expect(await txStatus(form.transaction)).toBe("pending");
    expect((await decide(form, "allow", form.browser)).status).toBe(303);
  });

  it("keeps a pending form valid when the page is loaded again", async () => {
    const form = await consentFor();
    const reloaded = await readConsent(form.pageUrl, form.browser);
    expect(reloaded.csrf).toBe(form.csrf);
    expect((await decide(form, "allow", form.browser)).status).toBe(303);
  });

  it("refuses an expired transaction", async () => {
    const form = await consentFor();
    await db().authTransaction.update({ where: { id: form.transaction }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect((await form.browser.request(form.pageUrl)).status).toBe(400);
    expect((await decide(form, "allow", form.browser)).status).toBe(400);
    expect(await txStatus(form.transaction)).toBe("pending");
  });

  it("refuses a decision other than allow or deny, and a form that is not form-encoded", async () => {
    const form = await consentFor();
    expect((await decide(form, "maybe", form.browser)).status).toBe(400);
    const json = await form.browser.request(new URL("consent", form.pageUrl).href, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    expect(json.status).toBe(400);
    expect(await txStatus(form.transaction)).toBe("pending");
  });

  it("shows an error page for an unknown transaction", async () => {
    const res = await new HttpBrowser().request(`${t.url}/consent?transaction=nope`);
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
  });
});

describe("remembered consent", () => {
  /** Where /authorize sends this browser: the consent page or straight upstream. */
  const firstHop = async (browser: HttpBrowser, overrides: Record<string, string | undefined> = {}) => {
    const res = await browser.request(authorizeUrl(t.url, client, overrides).href);
    expect(res.status).toBe(302);
    const location = res.headers.get("location")!;
    return location.startsWith(upstreamAuthorize) ? "upstream" : location.includes("/consent?") ? "consent" : location;
  };

  it("skips the page only for the same browser, client, redirect URI and scope", async () => {
    const form = await consentFor({ scope: "mcp" });
    expect((await decide(form, "allow", form.browser)).status).toBe(303);
    const sid = (await db().authTransaction.findUniqueOrThrow({ where: { id: form.transaction } })).browserSessionId;
    const record = await db().consent.findFirstOrThrow({ where: { clientId: client.client_id, browserSessionId: sid } });
    expect(record).toMatchObject({ redirectUri: client.redirect_uri, scope: "mcp" });
    expect(record.expiresAt.getTime()).toBeGreaterThan(Date.now() + 29 * 86400_000);

    const skipped = await form.browser.request(authorizeUrl(t.url, client, { scope: "mcp" }).href);
    const location = skipped.headers.get("location")!;
    expect(location.startsWith(`${upstreamAuthorize}?`)).toBe(true);
    // The skipped request is a transaction of its own, approved without a form.
    const tx = await db().authTransaction.findUniqueOrThrow({ where: { upstreamState: new URL(location).searchParams.get("state")! } });
    expect(tx).toMatchObject({ status: "approved", browserSessionId: record.browserSessionId, clientId: client.client_id });
    expect(tx.id).not.toBe(form.transaction);

    expect(await firstHop(form.browser, { scope: "mcp offline_access" })).toBe("consent");
    expect(await firstHop(form.browser, { redirect_uri: "http://localhost:7778/other" })).toBe("consent");
    expect(await firstHop(new HttpBrowser(), { scope: "mcp" })).toBe("consent");
  });

  it("is not given by Deny", async () => {
    const browser = new HttpBrowser();
    const form = await consentFor({}, browser);
    await decide(form, "deny", browser);
    expect(await firstHop(browser)).toBe("consent");
  });

  it("ends when the record expires", async () => {
    const browser = new HttpBrowser();
    const form = await consentFor({}, browser);
    await decide(form, "allow", browser);
    expect(await firstHop(browser)).toBe("upstream");
    const sid = (await db().authTransaction.findUniqueOrThrow({ where: { id: form.transaction } })).browserSessionId;
    await db().consent.updateMany({ where: { browserSessionId: sid }, data: { expiresAt: new Date(Date.now() - 1000) } });
    expect(await firstHop(browser)).toBe("consent");
  });

  it("is bound to a signed session cookie: the same session id re-encoded without the key's signature does not skip the page", async () => {
    const browser = new HttpBrowser();
    const form = await consentFor({}, browser);
    await decide(form, "allow", browser);
    const cookie = browser.cookieHeader(t.url);
    const value = /mab_session=([^;]+)/.exec(cookie)![1]!;
    const data = JSON.parse(Buffer.from(value, "base64").toString("utf8")) as Record<string, unknown>;
    // The same browser session id (which does have a remembered consent), in a cookie whose bytes
    // differ: only a broker that checks the signature shows the page again.
    const forged = Buffer.from(JSON.stringify({ ...data, _padding: "x" })).toString("base64");
    const res = await send(authorizeUrl(t.url, client).href, { headers: { cookie: cookie.replace(value, forged) } });
    expect(res.headers.get("location")).toContain("/consent?");
  });
});
