// Who may sign in, through a real OIDC issuer (oidc-provider on 127.0.0.1, the demo IdP run
// standalone) that releases email, email_verified and groups: each rule admits whom it names and
// nobody else, a refused account gets a page and nothing else, and a user who leaves the group
// (or whom a changed policy no longer admits) loses access at the next upstream re-check.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, obtainTokens, registerClient, tokenRequest, type RegisteredTestClient } from "../support/oauth-flow.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { basicAuth, postForm, registerOperatorClient } from "../support/oauth-client.ts";
import { startDemoIdentityProvider, type StandaloneDemoIdentityProvider } from "../../src/demo/identity-provider.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { startLoggedBroker } from "../http/logged-broker.ts";
import { mcpStatus as probeMcp } from "../support/mcp-probe.ts";

/** The IdP's accounts: claims beyond the defaults (verified `<id>@demo.invalid`, no groups). */
const accounts = new Map<string, Record<string, unknown>>([
  ["bob", { email: "Bob@Acme.com" }],
  ["eve", { email: "eve@acme.com", email_verified: false }],
  // A login that looks like an allowed address, but the address is unverified.
  ["x@acme.com", { email: "x@acme.com", email_verified: false }],
  ["dan", { email: "dan@acme.org" }],
  ["dina", { email: "dina@sub.acme.org" }],
  ["gina", { groups: ["mcp-users", "staff"] }],
  ["hank", { groups: ["staff"] }],
]);

let idp: StandaloneDemoIdentityProvider;
beforeAll(async () => {
  idp = await startDemoIdentityProvider({ clients: [], cookieKeys: ["policy"], accountClaims: (id) => accounts.get(id) });
});
afterAll(async () => idp.close());

const SECRET_KEY = randomBytes(32).toString("base64");

async function startOidcBroker(
  policy: Record<string, string>,
  options: { clock?: ManualClock; databaseUrl?: string; publicUrl?: string } = {},
): Promise<TestBroker> {
  const broker = await startBroker(
    {
      UPSTREAM_PROVIDER: "oidc",
      UPSTREAM_ISSUER: idp.url,
      UPSTREAM_CLIENT_ID: "broker",
      UPSTREAM_CLIENT_SECRET: "issuer-secret",
      UPSTREAM_DISPLAY_NAME: "Acme SSO",
      UPSTREAM_SCOPES: "openid email profile groups",
      RESOURCE_NAME: "Acme Docs",
      SECRET_KEY,
      ...(options.databaseUrl ? { DATABASE_URL: options.databaseUrl } : {}),
      // Another instance of the same deployment: tokens are for PUBLIC_URL/mcp, wherever it listens.
      ...(options.publicUrl ? { PUBLIC_URL: options.publicUrl } : {}),
      ...policy,
    },
    options.clock ? { clock: options.clock } : {},
  );
  await idp.addClient({ client_id: "broker", client_secret: "issuer-secret", redirect_uris: [`${broker.url}/oauth/callback`] });
  return broker;
}

const mcpStatus = (broker: TestBroker, token: string) => probeMcp(broker.origin, token);

/** Runs the flow as `user` up to the broker's callback, then presents it: the broker's answer. */
async function signInAs(broker: TestBroker, client: RegisteredTestClient, user: string) {
  const browser = new HttpBrowser();
  const { callback, state } = await authorize(broker.url, client, { user, browser, stopAt: `${broker.url}/oauth/callback` });
  const res = await browser.request(callback.href);
  return { res, state, body: await res.text(), location: res.headers.get("location") };
}

describe("access rules at sign-in", () => {
  let broker: TestBroker;
  let client: RegisteredTestClient;
  beforeAll(async () => {
    broker = await startOidcBroker({
      ALLOWED_USERS: "Olivia,oidc:sam,*@ACME.com",
      ALLOWED_EMAIL_DOMAINS: "acme.org",
      ALLOWED_GROUPS: "mcp-users",
    });
    client = await registerClient(broker.url, { client_name: "Claude" });
  });
  afterAll(async () => broker.stop());

  it.each([
    ["olivia", "a login, case-insensitive", "ALLOWED_USERS Olivia"],
    ["sam", "a subject", "ALLOWED_USERS oidc:sam"],
    ["bob", "a verified e-mail glob, case-insensitive", "ALLOWED_USERS *@ACME.com"],
    ["dan", "a verified e-mail domain", "ALLOWED_EMAIL_DOMAINS acme.org"],
    ["gina", "a group", "ALLOWED_GROUPS mcp-users"],
  ])("admits %s (%s)", async (user, _why, rule) => {
    const { location } = await signInAs(broker, client, user);
    expect(new URL(location!).searchParams.get("code")).toBeTruthy();
    const event = await broker.broker.database.db.auditEvent.findFirst({ where: { type: "login.completed", subject: `oidc:${user}` } });
    expect(JSON.parse(event!.detail)).toMatchObject({ rule });
  });

  it.each([
    ["eve", "an allowed address, unverified"],
    ["x@acme.com", "a login that looks like an allowed address, with the address unverified"],
    ["dina", "a subdomain of an allowed domain"],
    ["hank", "another group"],
    ["mallory", "no rule at all"],
  ])("refuses %s (%s): a page, no code, the upstream token revoked, audited", async (user) => {
    const before = await broker.broker.database.db.grant.count();
    const { res, body, state } = await signInAs(broker, client, user);
    expect(res.status).toBe(403);
    expect(res.headers.get("location")).toBeNull();
    expect(body).toContain(`<strong id="signed-in-as">${user}</strong>`);
    expect(body).toContain('This account cannot use <span id="resource-name">Acme Docs</span>');
    expect(body).toContain("sign out of Acme SSO");
    // The button back to the client: access_denied, with the client's state and the issuer.
    const back = new URL(/id="return-to-client" href="([^"]+)"/.exec(body)![1]!.replace(/&amp;/g, "&"));
    expect(back.origin + back.pathname).toBe(client.redirect_uri);
    expect(back.searchParams.get("error")).toBe("access_denied");
    expect(back.searchParams.get("state")).toBe(state);
    expect(back.searchParams.get("iss")).toBe(broker.url);
    expect(back.searchParams.get("code")).toBeNull();
    expect(await broker.broker.database.db.grant.count()).toBe(before);
    const refused = await broker.broker.database.db.auditEvent.findFirst({ where: { type: "login.refused", subject: `oidc:${user}` } });
    expect(JSON.parse(refused!.detail)).toMatchObject({ reason: "policy_denied", login: user });
    // Given back at the IdP already: nothing left there to destroy.
    expect(await idp.revokeSubject(user)).toBe(0);
  });

  it("a replayed callback of a refused sign-in issues nothing either", async () => {
    const browser = new HttpBrowser();
    const { callback } = await authorize(broker.url, client, { user: "mallory", browser, stopAt: `${broker.url}/oauth/callback` });
    expect((await browser.request(callback.href)).status).toBe(403);
    const again = await browser.request(callback.href);
    expect(again.status).toBe(400);
    expect(again.headers.get("location")).toBeNull();
  });

  it("machine clients need a rule that names them", async () => {
    const machine = await registerOperatorClient(broker.broker.database.db);
    const res = await postForm(
      `${broker.url}/token`,
      { grant_type: "client_credentials" },
      { authorization: basicAuth(machine.client_id, machine.client_secret!) },
    );
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: "unauthorized_client" });
    expect(String(res.json!.error_description)).toContain(`client:${machine.client_id}`);
    // Named by a subject rule, it is admitted (same database, a broker whose policy names it).
    const named = await startOidcBroker({ ALLOWED_USERS: `client:${machine.client_id}` }, { databaseUrl: `file:${broker.dir}/broker.db` });
    try {
      const ok = await postForm(
        `${named.url}/token`,
        { grant_type: "client_credentials" },
        { authorization: basicAuth(machine.client_id, machine.client_secret!) },
      );
      expect(ok.status).toBe(200);
      expect(await mcpStatus(named, ok.json!.access_token as string)).toBe(200);
    } finally {
      await named.stop();
    }
  });
});

describe("access on every use", () => {
  it("a user removed from the group loses access at the next re-check: 401 at /mcp, refresh refused, policy_denied", async () => {
    const clock = new ManualClock();
    const broker = await startOidcBroker({ ALLOWED_GROUPS: "mcp-users", UPSTREAM_RECHECK_SECONDS: "30" }, { clock });
    try {
      accounts.set("rita", { groups: ["mcp-users"] });
      const { tokens } = await obtainTokens(broker.url, { user: "rita" });
      expect(await mcpStatus(broker, tokens.access_token)).toBe(200);
      accounts.set("rita", { groups: ["staff"] });
      // Inside the window the last check holds: no upstream call per request.
      clock.advance(10_000);
      expect(await mcpStatus(broker, tokens.access_token)).toBe(200);
      clock.advance(21_000);
      expect(await mcpStatus(broker, tokens.access_token)).toBe(401);
      const client = await broker.broker.database.db.grant.findFirst({ where: { subject: "oidc:rita" } });
      expect(client).toMatchObject({ revokedReason: "policy_denied" });
      const refresh = await tokenRequest(broker.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client!.clientId });
      expect(refresh.status).toBe(400);
      expect(refresh.body.error).toBe("invalid_grant");
      const denied = await broker.broker.database.db.auditEvent.findFirst({ where: { type: "access.policy_denied", subject: "oidc:rita" } });
      expect(JSON.parse(denied!.detail)).toMatchObject({ reason: "policy_denied" });
    } finally {
      await broker.stop();
    }
  });

  it("a changed policy applies to existing grants at their next check", async () => {
    const clock = new ManualClock();
    const first = await startOidcBroker({ ALLOWED_USERS: "olivia,sam", UPSTREAM_RECHECK_SECONDS: "30" }, { clock });
    const databaseUrl = `file:${first.dir}/broker.db`;
    const olivia = await obtainTokens(first.url, { user: "olivia" });
    const sam = await obtainTokens(first.url, { user: "sam" });
    await first.stop({ keepDir: true });
    // The operator narrows the policy and restarts on the same database.
    const second = await startOidcBroker({ ALLOWED_USERS: "sam", UPSTREAM_RECHECK_SECONDS: "30" }, { clock, databaseUrl, publicUrl: first.url });
    try {
      clock.advance(31_000);
      expect(await mcpStatus(second, olivia.tokens.access_token)).toBe(401);
      expect(await mcpStatus(second, sam.tokens.access_token)).toBe(200);
    } finally {
      await second.stop();
      rmSync(first.dir, { recursive: true, force: true });
    }
  });
});

it("a refusal is logged at warn with who and which client, and never a token", async () => {
  const broker = await startLoggedBroker({ ALLOWED_USERS: "alice", LOG_LEVEL: "info" });
  try {
    const client = await registerClient(broker.url, { client_name: "Claude" });
    const browser = new HttpBrowser();
    const { callback } = await authorize(broker.url, client, { user: "zoe", browser, stopAt: `${broker.url}/oauth/callback` });
    expect((await browser.request(callback.href)).status).toBe(403);
    const line = await broker.logged((l) => l.msg === "sign-in refused by the access policy");
    expect(line).toMatchObject({ level: 40, subject: "demo:zoe", login: "zoe", clientId: client.client_id });
    const everything = JSON.stringify(broker.logs);
    expect(everything).not.toContain(callback.searchParams.get("code")!);
    expect(everything).not.toMatch(/access_token|refresh_token|id_token"/);
  } finally {
    await broker.stop();
  }
});

it("demo mode stays open, and enforces rules when the operator writes some", async () => {
  const open = await startBroker();
  const closed = await startBroker({ ALLOWED_USERS: "alice" });
  try {
    const anyone = await registerClient(open.url);
    expect((await authorize(open.url, anyone, { user: "zoe" })).callback.searchParams.get("code")).toBeTruthy();
    const client = await registerClient(closed.url);
    expect((await authorize(closed.url, client, { user: "alice" })).callback.searchParams.get("code")).toBeTruthy();
    const browser = new HttpBrowser();
    const { callback } = await authorize(closed.url, client, { user: "zoe", browser, stopAt: `${closed.url}/oauth/callback` });
    expect((await browser.request(callback.href)).status).toBe(403);
  } finally {
    await open.stop();
    await closed.stop();
  }
});
