// A server's own access rules narrow the global policy, never widen it: one decision
// (serverAccess) for the sign-in, every validation and every upstream re-check. A user whom the
// server's rules no longer admit — removed from its group — loses that server's grant at the next
// re-check (401 at /mcp, the refresh refused, audited), while a user still in the group keeps it,
// and the same user's grants for other servers live on. Through a real OIDC issuer (the demo IdP
// run standalone) whose accounts' groups the tests change.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes, randomUUID } from "node:crypto";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, obtainTokens, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { INITIALIZE_MESSAGE, mcpPost, mcpPostTo, mcpStatus } from "../support/mcp-probe.ts";
import { basicAuth, postForm, registerOperatorClient } from "../support/oauth-client.ts";
import { accessRules, otherServer, withCatalogue, withServerAccess } from "../support/catalogue.ts";
import { startDemoIdentityProvider, type StandaloneDemoIdentityProvider } from "../../src/demo/identity-provider.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { AccessPolicy, type IdentityFacts } from "../../src/grants/policy.ts";
import { serverAccess } from "../../src/grants/server-access.ts";
import { parseAccessPolicy } from "../../src/config/access-policy.ts";
import type { McpServerEntry } from "../../src/config/catalogue.ts";
import type { Config } from "../../src/config/load.ts";

describe("serverAccess: the global policy AND the server's rules", () => {
  const policy = new AccessPolicy(parseAccessPolicy({ ALLOWED_GROUPS: "staff", ALLOWED_USERS: "client:ci" }, "oidc", false));
  const server = (access: McpServerEntry["access"]): McpServerEntry => ({
    name: "docs",
    title: "Team docs",
    description: undefined,
    path: "/mcp/docs",
    resourceUrl: "https://broker.example/mcp/docs",
    isDefault: false,
    backend: { kind: "http", url: "http://127.0.0.1:1/mcp" },
    forwardUpstreamToken: false,
    scopes: { supported: ["mcp"], descriptions: {}, implies: {} },
    access,
    tools: [],
  });
  const platformOnly = server(accessRules({ groups: ["platform"] }));
  const person = (groups: string[]): IdentityFacts => ({ subject: "oidc:p", login: "p", verifiedEmails: [], groups, memberships: [] });

  it("admits whom both admit, naming both rules", () => {
    expect(serverAccess(policy, platformOnly, person(["staff", "platform"]))).toEqual({
      admitted: true,
      rule: "ALLOWED_GROUPS staff and servers.docs.access.groups platform",
    });
  });

  it("refuses whom the server's rules do not name", () => {
    expect(serverAccess(policy, platformOnly, person(["staff"]))).toEqual({
      admitted: false,
      refusedBy: "server",
      reason: "the access rules of Team docs do not admit this account",
    });
  });

  it("never widens the global policy: a server rule cannot admit whom the policy refuses", () => {
    expect(serverAccess(policy, platformOnly, person(["platform"]))).toMatchObject({ admitted: false, refusedBy: "policy" });
  });

  it("refuses facts that are not known (a session stored before they were kept) when a rule needs them", () => {
    expect(serverAccess(policy, server(accessRules({ groups: ["staff"] })), { subject: "oidc:p", login: "p" })).toMatchObject({ admitted: false });
  });

  it("is the global policy alone for a server without rules, and refuses a server that is not in the catalogue", () => {
    expect(serverAccess(policy, server(undefined), person(["staff"]))).toEqual({ admitted: true, rule: "ALLOWED_GROUPS staff" });
    expect(serverAccess(policy, undefined, person(["staff", "platform"]))).toMatchObject({ admitted: false, refusedBy: "unknown_server" });
  });

  it("admits a machine client only when the server's rules name it too", () => {
    expect(serverAccess(policy, platformOnly, { subject: "client:ci" })).toMatchObject({ admitted: false, refusedBy: "server" });
    expect(serverAccess(policy, server(accessRules({ users: ["client:ci"] })), { subject: "client:ci" })).toMatchObject({ admitted: true });
  });
});

/** The issuer's accounts: claims beyond the defaults. */
const accounts = new Map<string, Record<string, unknown>>();

let idp: StandaloneDemoIdentityProvider;
beforeAll(async () => {
  idp = await startDemoIdentityProvider({ clients: [], cookieKeys: ["server-access"], accountClaims: (id) => accounts.get(id) });
});
afterAll(async () => idp.close());

const RECHECK_SECONDS = 30;

/**
 * A broker signing in at the issuer; `env` may name the database, key, PUBLIC_URL and client of an
 * earlier one (a restart with another catalogue).
 */
async function startOidcBroker(clock: ManualClock, configure: (config: Config) => Config, env: Record<string, string> = {}) {
  const clientId = env.UPSTREAM_CLIENT_ID ?? `broker-${randomUUID()}`;
  const broker = await startBroker(
    {
      UPSTREAM_PROVIDER: "oidc",
      UPSTREAM_ISSUER: idp.url,
      UPSTREAM_CLIENT_SECRET: "issuer-secret",
      UPSTREAM_SCOPES: "openid email profile groups",
      ALLOWED_GROUPS: "staff",
      ALLOWED_USERS: "client:*",
      UPSTREAM_RECHECK_SECONDS: String(RECHECK_SECONDS),
      ...env,
      UPSTREAM_CLIENT_ID: clientId,
    },
    { clock, configure },
  );
  await idp.addClient({ client_id: clientId, client_secret: "issuer-secret", redirect_uris: [`${broker.url}/oauth/callback`] });
  return broker;
}

describe("a server's access rules at every use and every re-check", () => {
  const clock = new ManualClock();
  let broker: TestBroker;
  beforeAll(async () => {
    // The environment's server (/mcp) only for the platform group; another one (/mcp/open) for
    // whomever the global policy admits.
    broker = await startOidcBroker(
      clock,
      withCatalogue((server) => [{ ...server, access: accessRules({ groups: ["platform"] }) }, otherServer(server, "open")]),
    );
  });
  afterAll(async () => broker.stop());

  const db = () => broker.broker.database.db;

  it("a user removed from the group loses the server's grant at the next re-check; one still in it keeps it", async () => {
    accounts.set("sol", { groups: ["staff", "platform"] });
    accounts.set("pia", { groups: ["staff", "platform"] });
    const sol = await obtainTokens(broker.url, { user: "sol" });
    const pia = await obtainTokens(broker.url, { user: "pia" });
    expect(await mcpStatus(broker.url, sol.tokens.access_token)).toBe(200);
    expect(await mcpStatus(broker.url, pia.tokens.access_token)).toBe(200);
    const solGrant = await db().grant.findFirstOrThrow({ where: { clientId: sol.client.client_id } });
    // The same sign-in also stands behind a grant for the other server (no rules of its own).
    const openGrant = await db().grant.create({ data: { ...solGrant, id: randomUUID(), resource: `${broker.url}/mcp/open` } });

    accounts.set("sol", { groups: ["staff"] });
    // Within the window the last check holds.
    expect(await mcpStatus(broker.url, sol.tokens.access_token)).toBe(200);
    clock.advance((RECHECK_SECONDS + 1) * 1000);
    const refused = await mcpPost(broker.url, sol.tokens.access_token, INITIALIZE_MESSAGE);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toContain('error="invalid_token"');
    await refused.body?.cancel();
    expect(await mcpStatus(broker.url, pia.tokens.access_token)).toBe(200);

    expect(await db().grant.findUniqueOrThrow({ where: { id: solGrant.id } })).toMatchObject({ revokedReason: "server_access_denied" });
    // The global policy still admits sol: the session and the other server's grant live on.
    expect(await db().grant.findUniqueOrThrow({ where: { id: openGrant.id } })).toMatchObject({ revokedAt: null });
    expect(await db().upstreamSession.findUniqueOrThrow({ where: { id: solGrant.upstreamSessionId! } })).toMatchObject({ status: "active" });
    const denied = await db().auditEvent.findFirstOrThrow({ where: { type: "access.policy_denied", grantId: solGrant.id } });
    expect(JSON.parse(denied.detail)).toMatchObject({ reason: "server_access_denied", refusedBy: "server", server: "mcp", login: "sol" });
    expect(await db().auditEvent.count({ where: { type: "grant.revoked", grantId: solGrant.id } })).toBe(1);

    const refresh = await tokenRequest(broker.url, { grant_type: "refresh_token", refresh_token: sol.tokens.refresh_token, client_id: sol.client.client_id });
    expect(refresh.body.error).toBe("invalid_grant");
  });

  it("a user outside the group gets nothing from the server: refused at sign-in, no code, no token", async () => {
    accounts.set("nina", { groups: ["staff"] });
    const client = await registerClient(broker.url);
    const browser = new HttpBrowser();
    const { callback } = await authorize(broker.url, client, { user: "nina", browser, stopAt: `${broker.url}/oauth/callback` });
    const res = await browser.request(callback.href);
    expect(res.status).toBe(403);
    expect(res.headers.get("location")).toBeNull();
    expect(await db().grant.count({ where: { clientId: client.client_id } })).toBe(0);
  });

  it("a machine client the global policy names, but the server's rules do not, is refused", async () => {
    const machine = await registerOperatorClient(db());
    const issued = await postForm(
      `${broker.url}/token`,
      { grant_type: "client_credentials" },
      { authorization: basicAuth(machine.client_id, machine.client_secret!) },
    );
    expect(issued.status).toBe(200);
    expect(await mcpStatus(broker.url, issued.json!.access_token as string)).toBe(401);
  });
});

it("a grant whose server left the catalogue ends at the next re-check", async () => {
  const clock = new ManualClock();
  // First the environment's server; then a catalogue file that no longer lists it.
  const shared = { SECRET_KEY: randomBytes(32).toString("base64"), UPSTREAM_CLIENT_ID: `broker-${randomUUID()}` };
  const first = await startOidcBroker(clock, withServerAccess({ groups: ["staff"] }), shared);
  accounts.set("otto", { groups: ["staff"] });
  const otto = await obtainTokens(first.url, { user: "otto" });
  expect(await mcpStatus(first.url, otto.tokens.access_token)).toBe(200);
  await first.stop({ keepDir: true });
  const second = await startOidcBroker(
    clock,
    withCatalogue((server) => [otherServer(server, "docs")], "file"),
    {
      ...shared,
      DATABASE_URL: `file:${first.dir}/broker.db`,
      PUBLIC_URL: first.url,
    },
  );
  try {
    clock.advance((RECHECK_SECONDS + 1) * 1000);
    // Nothing answers at the removed server's path any more (404 before any token is read); the
    // token presented at a server that remains is read, re-checked and refused.
    expect(await mcpStatus(second.origin, otto.tokens.access_token)).toBe(404);
    expect((await mcpPostTo(`${second.origin}/mcp/docs`, otto.tokens.access_token, INITIALIZE_MESSAGE)).status).toBe(401);
    const grant = await second.broker.database.db.grant.findFirstOrThrow({ where: { clientId: otto.client.client_id } });
    expect(grant.revokedReason).toBe("server_access_denied");
    const denied = await second.broker.database.db.auditEvent.findFirstOrThrow({ where: { type: "access.policy_denied", grantId: grant.id } });
    expect(JSON.parse(denied.detail)).toMatchObject({ reason: "server_access_denied", refusedBy: "unknown_server", server: null });
  } finally {
    await second.stop();
  }
});
