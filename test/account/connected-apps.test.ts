// The connected-apps page over real HTTP, against a real broker in demo mode. Sign-in
// through the demo IdP (and its callback's guards), the list of a real MCP SDK client's grant,
// Revoke (at once at /mcp and /token), Revoke all, Sign out (consents forgotten), the CSRF rule,
// other users' grants, and the access policy's refusal. account-browser.test.ts drives the same
// page in Chromium; instances.test.ts covers a revocation reaching another instance.
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { CallbackServer, connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { authorize, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { registerOperatorClient, tamper } from "../support/oauth-client.ts";
import { AccountVisitor, readAccountPage } from "./account-visitor.ts";
import { mcpStatus as probeMcp } from "../support/mcp-probe.ts";

let t: TestBroker;
let callback: CallbackServer;
beforeAll(async () => {
  [t, callback] = await Promise.all([startBroker(), new CallbackServer().start()]);
});
afterAll(async () => {
  await t.stop();
  await callback.close();
});

const db = () => t.broker.database.db;

/** The real MCP SDK client connecting as `user`, who answers consent and login in `browser`. */
async function connectSdk(user: string, browser = new HttpBrowser()): Promise<ConnectedClient> {
  return connectWithOAuth(`${t.url}/mcp`, callback, async (url) => {
    const back = await browser.walk(url.href, callback.url, answerAs(user));
    await fetch(back);
  });
}

async function disconnect(c: ConnectedClient): Promise<void> {
  await c.transport.terminateSession().catch(() => undefined);
  await c.client.close();
}

/** The status /mcp answers an initialize request carrying this access token with. */
const mcpStatus = (accessToken: string) => probeMcp(t.url, accessToken);

const refresh = (c: ConnectedClient) =>
  tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: c.provider.savedTokens!.refresh_token!, client_id: c.provider.clientInfo!.client_id });

const grantOf = async (c: ConnectedClient) => db().grant.findFirstOrThrow({ where: { clientId: c.provider.clientInfo!.client_id } });

describe("signing in", () => {
  it("without a sign-in the page offers one button, posting a CSRF token; no framing, no caching", async () => {
    const page = await new AccountVisitor(t.url).open();
    expect(page.status).toBe(200);
    expect(page.signedInAs).toBeNull();
    expect(page.apps).toEqual([]);
    expect([...page.html.matchAll(/<button[^>]*>([^<]*)<\/button>/g)].map((m) => m[1])).toEqual(["Sign in with Demo identity provider"]);
    expect(page.html).toContain('<form method="post" action="account">');
    expect(page.csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(page.headers.get("content-security-policy")).toMatch(/frame-ancestors 'none'/);
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.headers.get("cache-control")).toBe("no-store");
    expect(page.headers.get("content-type")).toMatch(/^text\/html/);
  });

  it("signs in through the IdP and back to the page, keeps no upstream token, audits it", async () => {
    const revoke = jest.spyOn(t.broker.services.provider, "revoke");
    try {
      const sessionsBefore = await db().upstreamSession.count();
      const visitor = new AccountVisitor(t.url);
      const { callback: back, page } = await visitor.signIn("amelia");
      expect(back.status).toBe(302);
      expect(back.headers.get("location")).toBe(`${t.url}/account`);
      expect(page.signedInAs).toBe("amelia");
      expect(page.html).toContain('id="no-apps"');
      expect([...page.html.matchAll(/<button[^>]*>([^<]*)<\/button>/g)].map((m) => m[1])).toEqual(["Sign out"]);
      // The upstream token was given back, and nothing was stored from it.
      expect(revoke).toHaveBeenCalledTimes(1);
      expect(await db().upstreamSession.count()).toBe(sessionsBefore);
      const login = await db().accountLogin.findFirstOrThrow({ where: { status: "completed" } });
      expect(login.upstreamVerifierEnc).toBeNull();
      const event = await db().auditEvent.findFirstOrThrow({ where: { type: "account.signed_in", subject: "demo:amelia" } });
      expect(JSON.parse(event.detail)).toMatchObject({ provider: "demo", login: "amelia" });
    } finally {
      revoke.mockRestore();
    }
  });

  /** Starts a sign-in in `visitor`'s browser and returns the IdP's callback URL, not yet opened. */
  async function pendingCallback(visitor: AccountVisitor, user: string): Promise<URL> {
    const { csrf } = await visitor.open();
    const res = await visitor.post({ action: "sign_in", csrf });
    return visitor.browser.walk(res.headers.get("location")!, `${t.url}/oauth/callback`, answerAs(user));
  }

  it("refuses the callback in another browser, and then in the right one too", async () => {
    const visitor = new AccountVisitor(t.url);
    const url = await pendingCallback(visitor, "bruno");
    const stranger = new HttpBrowser();
    const elsewhere = await stranger.request(url.href);
    expect(elsewhere.status).toBe(403);
    expect(await elsewhere.text()).toContain("Sign-in started in another browser");
    const late = await visitor.browser.request(url.href);
    expect(late.status).toBe(400);
    expect((await visitor.open()).signedInAs).toBeNull();
    expect(await db().browserIdentity.count({ where: { subject: "demo:bruno" } })).toBe(0);
  });

  it("accepts a callback once: a replay is refused", async () => {
    const visitor = new AccountVisitor(t.url);
    const url = await pendingCallback(visitor, "chen");
    expect((await visitor.browser.request(url.href)).status).toBe(302);
    const replay = await visitor.browser.request(url.href);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain("Sign-in already used");
  });

  it("refuses an expired sign-in", async () => {
    const visitor = new AccountVisitor(t.url);
    const url = await pendingCallback(visitor, "dora");
    await db().accountLogin.update({ where: { upstreamState: url.searchParams.get("state")! }, data: { expiresAt: new Date(Date.now() - 1000) } });
    const res = await visitor.browser.request(url.href);
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("Sign-in expired");
    expect((await visitor.open()).signedInAs).toBeNull();
  });

  it("shows a clear page when the person cancels at the IdP", async () => {
    const visitor = new AccountVisitor(t.url);
    const url = await pendingCallback(visitor, "erin");
    // What the IdP sends back when the person cancels (RFC 6749 §4.1.2.1).
    const cancelled = new URL(url.pathname, url);
    cancelled.search = new URLSearchParams({ error: "access_denied", state: url.searchParams.get("state")! }).toString();
    const back = await visitor.browser.request(cancelled.href);
    expect(back.status).toBe(400);
    const html = await back.text();
    expect(html).toContain("Sign-in cancelled");
    expect(html).toContain("Sign in again from the connected apps page.");
    expect((await db().accountLogin.findUniqueOrThrow({ where: { upstreamState: url.searchParams.get("state")! } })).status).toBe("failed");
    expect((await visitor.open()).signedInAs).toBeNull();
  });

  it("refuses a sign-in without the page's CSRF token, and starts none", async () => {
    const visitor = new AccountVisitor(t.url);
    const { csrf } = await visitor.open();
    const other = await new AccountVisitor(t.url).open();
    const before = await db().accountLogin.count();
    const forms: Record<string, string>[] = [{ action: "sign_in" }, { action: "sign_in", csrf: tamper(csrf) }, { action: "sign_in", csrf: other.csrf }];
    for (const form of forms) {
      const res = await visitor.post(form);
      expect(res.status).toBe(403);
      expect(res.headers.get("location")).toBeNull();
    }
    // Without any session cookie at all.
    expect((await new HttpBrowser().request(visitor.pageUrl, { form: { action: "sign_in", csrf } })).status).toBe(403);
    expect(await db().accountLogin.count()).toBe(before);
  });

  it("a client's authorization still completes through the same callback", async () => {
    const client = await registerClient(t.url);
    const { callback: back } = await authorize(t.url, client, { user: "fritz" });
    expect(back.searchParams.get("code")).toBeTruthy();
  });
});

describe("the list", () => {
  let alice: AccountVisitor;
  let sdk: ConnectedClient;
  beforeAll(async () => {
    sdk = await connectSdk("alice");
    alice = new AccountVisitor(t.url);
    await alice.signIn("alice");
  });
  afterAll(async () => disconnect(sdk));

  it("shows the grant the MCP SDK client got: name, unverified, redirect host, scopes, dates", async () => {
    const page = await alice.open();
    const grant = await grantOf(sdk);
    const app = page.apps.find((a) => a.grantId === grant.id);
    const format = (d: Date) => `${new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" }).format(d)} UTC`;
    expect(app).toEqual({
      grantId: grant.id,
      name: "SDK e2e client",
      verified: false,
      redirectHost: new URL(callback.url).host,
      scopes: grant.scope.split(" "),
      created: format(grant.createdAt),
      lastUsed: format(grant.lastUsedAt),
      ends: format(grant.idleExpiresAt < grant.absoluteExpiresAt ? grant.idleExpiresAt : grant.absoluteExpiresAt),
    });
    expect(page.html).toMatch(/<span class="badge"[^>]*>Unverified<\/span>/);
  });

  it("calls an operator-registered client verified", async () => {
    const manual = await registerOperatorClient(db(), {
      client_name: "Ops console",
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      redirect_uris: ["https://ops.example.com/cb"],
    });
    await authorize(t.url, manual, { user: "alice" });
    const app = (await alice.open()).apps.find((a) => a.name === "Ops console");
    expect(app).toMatchObject({ verified: true, redirectHost: "ops.example.com" });
  });

  it("calls a metadata-document client verified only when its host is in CIMD_TRUSTED_HOSTS", async () => {
    const trusting = await startBroker({ CIMD_TRUSTED_HOSTS: "claude.ai" });
    try {
      const db2 = trusting.broker.database.db;
      const now = new Date();
      const later = new Date(now.getTime() + 3_600_000);
      for (const id of ["https://claude.ai/oauth/claude-code-client-metadata", "https://tools.example.net/client.json"]) {
        await db2.client.create({
          data: { id, redirectUris: "[]", tokenEndpointAuthMethod: "none", grantTypes: "[]", responseTypes: "[]", registrationType: "cimd", clientName: id },
        });
        await db2.grant.create({
          data: {
            id: `g-${id.length}`,
            clientId: id,
            subject: "demo:vera",
            kind: "authorization_code",
            resource: `${trusting.url}/mcp`,
            scope: "mcp",
            lastUsedAt: now,
            idleExpiresAt: later,
            absoluteExpiresAt: later,
          },
        });
      }
      const apps = await trusting.broker.services.grants.connectedApps.list("demo:vera");
      expect(Object.fromEntries(apps.map((a) => [a.clientId, a.verified]))).toEqual({
        "https://claude.ai/oauth/claude-code-client-metadata": true,
        "https://tools.example.net/client.json": false,
      });
    } finally {
      await trusting.stop();
    }
  });

  it("shows only the signed-in user's live grants", async () => {
    await connectSdk("bob").then(disconnect);
    const dead = await registerClient(t.url, { client_name: "Expired one" });
    await authorize(t.url, dead, { user: "alice" });
    await db().grant.updateMany({ where: { clientId: dead.client_id }, data: { idleExpiresAt: new Date(Date.now() - 1000) } });
    const page = await alice.open();
    const subjects = await db().grant.findMany({ where: { id: { in: page.apps.map((a) => a.grantId) } }, select: { subject: true } });
    expect(new Set(subjects.map((s) => s.subject))).toEqual(new Set(["demo:alice"]));
    expect(page.apps.map((a) => a.name)).not.toContain("Expired one");
    expect(page.apps.length).toBe(await db().grant.count({ where: { subject: "demo:alice", revokedAt: null, idleExpiresAt: { gt: new Date() } } }));
  });

  it("escapes what the client registered", async () => {
    const evil = await registerClient(t.url, { client_name: '<script>alert("x")</script>' });
    await authorize(t.url, evil, { user: "alice" });
    const page = await alice.open();
    expect(page.html).not.toContain("<script>alert");
    expect(page.html).toContain("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;");
  });

  it("closes once the sign-in is older than the account session", async () => {
    const visitor = new AccountVisitor(t.url);
    await visitor.signIn("gus");
    await db().browserIdentity.updateMany({ where: { subject: "demo:gus" }, data: { signedInAt: new Date(Date.now() - 3601_000) } });
    const page = await visitor.open();
    expect(page.signedInAs).toBeNull();
    expect(page.html).toContain('value="sign_in"');
  });
});

describe("revoking", () => {
  it("Revoke: that client's access token is refused at /mcp at once, its refresh token too; the other app stays", async () => {
    const browser = new HttpBrowser();
    const [first, second] = [await connectSdk("hana", browser), await connectSdk("hana", browser)];
    try {
      const hana = new AccountVisitor(t.url);
      await hana.signIn("hana");
      const grant = await grantOf(first);
      expect(await mcpStatus(first.provider.savedTokens!.access_token)).toBe(200);
      const page = await hana.act("revoke", { grant: grant.id });
      expect(page.html).toContain('id="notice"');
      expect(page.apps.map((a) => a.grantId)).toEqual([(await grantOf(second)).id]);

      expect(await mcpStatus(first.provider.savedTokens!.access_token)).toBe(401);
      const refused = await refresh(first);
      expect(refused.status).toBe(400);
      expect(refused.body.error).toBe("invalid_grant");
      expect(await mcpStatus(second.provider.savedTokens!.access_token)).toBe(200);

      // The grant, with the user's reason. Its tokens are refused for its revocation (above):
      // every use reads the grant with the token.
      const after = await db().grant.findUniqueOrThrow({ where: { id: grant.id } });
      expect(after.revokedReason).toBe("user_revoked");
      // The cascade's own grant.revoked, and who did it from where.
      expect(await db().auditEvent.count({ where: { type: "grant.revoked", grantId: grant.id } })).toBe(1);
      const audited = await db().auditEvent.findFirstOrThrow({ where: { type: "account.revoked", grantId: grant.id } });
      expect(audited.subject).toBe("demo:hana");
      expect(audited.ip).toBeTruthy();
    } finally {
      await disconnect(first);
      await disconnect(second);
    }
  });

  it("another user's grant id is answered 404 and stays live", async () => {
    const bob = await connectSdk("ivan");
    try {
      const mallory = new AccountVisitor(t.url);
      await mallory.signIn("mallory");
      const grant = await grantOf(bob);
      const { csrf } = await mallory.open();
      for (const id of [grant.id, "no-such-grant"]) {
        const res = await mallory.post({ action: "revoke", csrf, grant: id });
        expect(res.status).toBe(404);
        expect(await res.text()).toContain("No such connected app");
      }
      expect((await db().grant.findUniqueOrThrow({ where: { id: grant.id } })).revokedAt).toBeNull();
      expect(await mcpStatus(bob.provider.savedTokens!.access_token)).toBe(200);
    } finally {
      await disconnect(bob);
    }
  });

  it("refuses a missing, wrong or borrowed CSRF token, and revokes nothing", async () => {
    const c = await connectSdk("jade");
    try {
      const jade = new AccountVisitor(t.url);
      await jade.signIn("jade");
      const other = new AccountVisitor(t.url);
      await other.signIn("jade");
      const grant = await grantOf(c);
      const { csrf } = await jade.open();
      const { csrf: borrowed } = await other.open();
      for (const forged of [undefined, "", tamper(csrf), borrowed]) {
        const forms: Record<string, string>[] = [{ action: "revoke", grant: grant.id }, { action: "revoke_all" }, { action: "sign_out" }];
        for (const form of forms) {
          const res = await jade.post(forged === undefined ? form : { ...form, csrf: forged });
          expect(res.status).toBe(403);
          expect(res.headers.get("location")).toBeNull();
        }
      }
      expect((await db().grant.findUniqueOrThrow({ where: { id: grant.id } })).revokedAt).toBeNull();
      expect((await jade.open()).signedInAs).toBe("jade");
    } finally {
      await disconnect(c);
    }
  });

  it("refuses to revoke once the sign-in is too old", async () => {
    const c = await connectSdk("kai");
    try {
      const kai = new AccountVisitor(t.url);
      await kai.signIn("kai");
      const { csrf } = await kai.open();
      await db().browserIdentity.updateMany({ where: { subject: "demo:kai" }, data: { signedInAt: new Date(Date.now() - 3601_000) } });
      const res = await kai.post({ action: "revoke", csrf, grant: (await grantOf(c)).id });
      expect(res.status).toBe(403);
      expect(await mcpStatus(c.provider.savedTokens!.access_token)).toBe(200);
    } finally {
      await disconnect(c);
    }
  });

  it("Revoke all: every app of the user stops at once; other users keep theirs", async () => {
    const browser = new HttpBrowser();
    const mine = [await connectSdk("lena", browser), await connectSdk("lena", browser)];
    const theirs = await connectSdk("milo");
    try {
      const lena = new AccountVisitor(t.url);
      expect((await lena.signIn("lena")).page.apps).toHaveLength(2);
      const page = await lena.act("revoke_all");
      expect(page.apps).toEqual([]);
      expect(page.html).toContain('id="no-apps"');
      for (const c of mine) {
        expect(await mcpStatus(c.provider.savedTokens!.access_token)).toBe(401);
        expect((await refresh(c)).status).toBe(400);
      }
      expect(await mcpStatus(theirs.provider.savedTokens!.access_token)).toBe(200);
    } finally {
      for (const c of [...mine, theirs]) await disconnect(c);
    }
  });
});

describe("sign out", () => {
  it("forgets who this browser was and its consents: the next authorization asks again", async () => {
    const browser = new HttpBrowser();
    const client = await registerClient(t.url, { client_name: "Remembered" });
    const consentShown = async () => {
      const from = browser.visited.length;
      await authorize(t.url, client, { user: "nora", browser });
      return browser.visited.slice(from).some((u) => new URL(u).pathname === "/consent");
    };
    expect(await consentShown()).toBe(true);
    expect(await consentShown()).toBe(false);
    expect(await db().consent.count({ where: { clientId: client.client_id } })).toBe(1);

    // The client's authorization signed nora in at the IdP in this browser: the page is open.
    const nora = new AccountVisitor(t.url, browser);
    const { csrf: before, signedInAs } = await nora.open();
    expect(signedInAs).toBe("nora");
    const cookieBefore = browser.cookieHeader(t.url);
    const page = await nora.act("sign_out");
    expect(page.signedInAs).toBeNull();
    expect(page.html).toContain('id="notice"');
    // A fresh browser session: new CSRF token, the old one refused.
    expect(page.csrf).not.toBe(before);
    expect(browser.cookieHeader(t.url)).not.toBe(cookieBefore);
    expect((await nora.post({ action: "revoke_all", csrf: before })).status).toBe(403);
    expect(await db().consent.count({ where: { clientId: client.client_id } })).toBe(0);
    expect(await db().browserIdentity.count({ where: { subject: "demo:nora" } })).toBe(0);
    expect(await db().auditEvent.count({ where: { type: "account.signed_out", subject: "demo:nora" } })).toBe(1);

    expect(await consentShown()).toBe(true);
    // Sign-out ends the browser's session, not the grants.
    expect(await db().grant.count({ where: { clientId: client.client_id, revokedAt: null } })).toBe(3);
  });
});

describe("the sweep", () => {
  it("removes expired account sign-ins and remembered identities", async () => {
    const past = new Date(Date.now() - 1000);
    await db().accountLogin.create({ data: { id: "old-login", browserSessionId: "x", upstreamState: "old-state", status: "pending", expiresAt: past } });
    await db().browserIdentity.create({
      data: { browserSessionId: "old-browser", subject: "demo:old", provider: "demo", signedInAt: past, expiresAt: past },
    });
    const result = await t.broker.services.grants.sweep();
    expect(result.accountLogins).toBeGreaterThanOrEqual(1);
    expect(result.browserIdentities).toBeGreaterThanOrEqual(1);
    expect(await db().accountLogin.count({ where: { id: "old-login" } })).toBe(0);
    expect(await db().browserIdentity.count({ where: { browserSessionId: "old-browser" } })).toBe(0);
  });
});

describe("an account the access policy does not admit", () => {
  let strict: TestBroker;
  beforeAll(async () => {
    strict = await startBroker({ ALLOWED_USERS: "someone-else" });
  });
  afterAll(async () => strict.stop());

  it("sees the refusal page, with a way to try another account, and is not signed in", async () => {
    const visitor = new AccountVisitor(strict.url);
    const { callback: back, page } = await visitor.signIn("olivia");
    expect(back.status).toBe(403);
    const html = await back.text();
    expect(html).toContain('<strong id="signed-in-as">olivia</strong>');
    expect(html).toContain(`href="${strict.url}/account?another=1"`);
    expect(html).not.toContain('id="return-to-client"');
    expect(page.signedInAs).toBeNull();
    const sdb = strict.broker.database.db;
    expect(await sdb.browserIdentity.count()).toBe(0);
    expect(await sdb.auditEvent.count({ where: { type: "login.refused", subject: "demo:olivia" } })).toBe(1);
    expect(await sdb.auditEvent.count({ where: { type: "account.signed_in" } })).toBe(0);

    // "Sign in with another account" asks the IdP to let the person choose.
    const again = await visitor.open("?another=1");
    const res = await visitor.post({ action: "sign_in", csrf: again.csrf, select_account: "1" });
    expect(res.status).toBe(303);
    expect(new URL(res.headers.get("location")!).searchParams.get("prompt")).toContain("login");
    expect(readAccountPage(again.status, again.headers, again.html).html).toContain('name="select_account" value="1"');
  });

  it("the admitted account gets in", async () => {
    const { page } = await new AccountVisitor(strict.url).signIn("someone-else");
    expect(page.signedInAs).toBe("someone-else");
  });
});
