// Connected accounts in the grants layer, against the OAuth 2 emulator over real HTTP: a connect
// step bound to the browser that started it, refresh before expiry once for any number of
// concurrent requests (in one process, and across two instances sharing the database), a refresh
// the service refuses, and a disconnect that revokes at the service and ends the grants of the
// servers that need the connection.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "@jest/globals";
import { randomUUID } from "node:crypto";
import { insertClient, machineGrantsHarness, type GrantsHarness } from "../support/grants-harness.ts";
import { startOAuth2Emulator, type OAuth2Emulator } from "../support/oauth2-emulator.ts";
import { catalogueFile } from "../support/catalogue.ts";
import { trackerConnection } from "../support/connections.ts";
import { createPostgresDatabase, postgresAvailable } from "../support/pg-database.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { Connections, REFRESH_AHEAD_MS } from "../../src/grants/connections.ts";
import { initialDeadlines } from "../../src/grants/lifecycle.ts";
import { IdentityAssertions } from "../../src/grants/identity-assertion.ts";
import { TOKEN_EXCHANGE } from "../../src/grants/types.ts";
import { presented } from "../support/grants-harness.ts";

const redirectUris: string[] = [];
let tracker: OAuth2Emulator;
let h: GrantsHarness;
let clock: ManualClock;
let remove: () => void;
let configFile: string;

beforeAll(async () => {
  tracker = await startOAuth2Emulator({ clientId: "tracker-app", clientSecret: "tracker-secret", redirectUris, accessTtlSeconds: 3600 });
  const file = catalogueFile([
    "servers:",
    "  - name: issues",
    "    url: http://127.0.0.1:9/mcp",
    "    connection: tracker",
    "    exchangeClients: [mab_c_issues-server]",
    "connections:",
    ...trackerConnection(tracker),
  ]);
  remove = file.remove;
  configFile = file.file;
  clock = new ManualClock();
  // Nobody signs in here: the login provider points at a closed port.
  h = await machineGrantsHarness({ BROKER_CONFIG: file.file }, { clock });
  redirectUris.push(`${h.config.publicUrl}/oauth/connect/callback`);
});
afterAll(async () => {
  await h?.close();
  await tracker?.close();
  remove?.();
});
beforeEach(() => {
  tracker.nextUser = null;
});

/** Runs a connect step for `subject` as `account` at the tracker, from browser session `sid`; the callback URL it came back with. */
async function authorizeAtTracker(subject: string, account: string, sid: string, at: GrantsHarness = h): Promise<URL> {
  tracker.nextUser = account;
  const url = await at.grants.connectFlow.start({ subject, name: "tracker", browserSessionId: sid });
  const res = await fetch(url, { redirect: "manual" });
  return new URL(res.headers.get("location")!);
}

async function connect(subject: string, account: string, at: GrantsHarness = h): Promise<void> {
  const callback = await authorizeAtTracker(subject, account, "browser-1", at);
  const outcome = await at.grants.connectFlow.complete(callback, "browser-1", "127.0.0.1");
  expect(outcome).toEqual({ name: "tracker", transactionId: null });
}

async function loginAtTracker(token: string): Promise<string | null> {
  const res = await fetch(tracker.userinfoUrl, { headers: { authorization: `Bearer ${token}` } });
  return res.ok ? ((await res.json()) as { login: string }).login : null;
}

describe("connecting", () => {
  it("links the account to the user who started the step, and hands out its token", async () => {
    await connect("oidc:ann", "ann-tr");
    const state = await h.grants.connections.tokenFor("oidc:ann", "tracker");
    expect(state.status).toBe("ok");
    expect(await loginAtTracker(state.status === "ok" ? state.token : "")).toBe("ann-tr");
    const [view] = await h.grants.connections.list("oidc:ann");
    expect(view).toMatchObject({ name: "tracker", connected: true, account: "ann-tr", broken: false });
    // Another user has none.
    expect(await h.grants.connections.tokenFor("oidc:other", "tracker")).toEqual({ status: "missing", reason: "not_connected" });
  });

  it("refuses the callback in another browser session, and a replay of it", async () => {
    const callback = await authorizeAtTracker("oidc:eve-target", "eve-tr", "victim-browser");
    await expect(h.grants.connectFlow.complete(callback, "attacker-browser", undefined)).rejects.toMatchObject({ title: "Sign-in started in another browser" });
    // The refused callback ended the step: the right browser cannot use it later either.
    await expect(h.grants.connectFlow.complete(callback, "victim-browser", undefined)).rejects.toMatchObject({ title: "Sign-in already used" });
    expect(await h.grants.connections.tokenFor("oidc:eve-target", "tracker")).toMatchObject({ status: "missing" });
  });
});

/**
 * 20 requests at once, half in another instance on the same database (its own single-flight, the
 * shared lease), when the token is about to expire: one refresh at the service, and every token
 * handed out is one it honours for this user.
 */
async function refreshesOnce(at: GrantsHarness, time: ManualClock, subject: string, account: string): Promise<void> {
  await connect(subject, account, at);
  const first = await at.grants.connections.tokenFor(subject, "tracker");
  const other = new Connections(at.grants.context, at.grants.lifecycle);
  // To a second inside the refresh margin of the expiry the service gave (stamped by the wall
  // clock at the exchange, which runs on while the injected one stands still).
  const linked = await at.database.db.connection.findUniqueOrThrow({ where: { subject_name: { subject, name: "tracker" } } });
  time.advance(Math.max(0, linked.accessExpiresAt!.getTime() - REFRESH_AHEAD_MS + 1000 - time.now()));
  const refreshes = tracker.count("token:refresh_token");
  const states = await Promise.all(Array.from({ length: 20 }, (_, i) => (i % 2 ? other : at.grants.connections).tokenFor(subject, "tracker")));
  expect(tracker.count("token:refresh_token") - refreshes).toBe(1);
  const tokens = new Set(states.map((s) => (s.status === "ok" ? s.token : "missing")));
  expect(tokens.has("missing")).toBe(false);
  for (const token of tokens) expect(await loginAtTracker(token)).toBe(account);
  // The renewed token is the one stored (encrypted).
  const row = await at.database.db.connection.findUniqueOrThrow({ where: { subject_name: { subject, name: "tracker" } } });
  const stored = await at.secrets.decrypt(row.accessTokenEnc);
  expect(first.status === "ok" && stored !== first.token).toBe(true);
  expect(tokens.has(stored)).toBe(true);
}

describe("keeping a connection alive", () => {
  it("refreshes a token about to expire once, for 20 concurrent requests in two instances", async () => {
    await refreshesOnce(h, clock, "oidc:bea", "bea-tr");
  });

  it("marks the connection gone when the service refuses the refresh", async () => {
    await connect("oidc:cal", "cal-tr");
    tracker.revokeUser("cal-tr");
    clock.advance(3600 * 1000);
    expect(await h.grants.connections.tokenFor("oidc:cal", "tracker")).toEqual({ status: "missing", reason: "revoked" });
    const [view] = await h.grants.connections.list("oidc:cal");
    expect(view).toMatchObject({ connected: false, broken: true });
    const events = await h.database.db.auditEvent.findMany({ where: { type: "connection.invalid", subject: "oidc:cal" } });
    expect(events).toHaveLength(1);
  });
});

(postgresAvailable ? describe : describe.skip)("keeping a connection alive on PostgreSQL", () => {
  it("refreshes once for 20 concurrent requests in two instances sharing the database", async () => {
    const database = await createPostgresDatabase();
    const time = new ManualClock();
    const at = await machineGrantsHarness({ BROKER_CONFIG: configFile }, { clock: time, databaseUrl: database.url });
    try {
      await refreshesOnce(at, time, "oidc:pia", "pia-tr");
    } finally {
      await at.close();
      await database.drop();
    }
  });
});

describe("disconnecting", () => {
  it("revokes at the service, forgets the tokens and ends the grants of the servers that need it", async () => {
    await connect("oidc:dee", "dee-tr");
    expect(tracker.liveTokenCount("dee-tr")).toBeGreaterThan(0);
    const client = await insertClient(h.database);
    const grant = await h.database.db.grant.create({
      data: {
        id: randomUUID(),
        clientId: client.id,
        subject: "oidc:dee",
        kind: "authorization_code",
        resource: `${h.config.publicUrl}/mcp/issues`,
        scope: "mcp",
        ...initialDeadlines(h.config, new Date(clock.now())),
      },
    });
    expect(await h.grants.connections.disconnect("oidc:dee", "tracker", "127.0.0.1")).toBe(true);
    expect(tracker.liveTokenCount("dee-tr")).toBe(0);
    expect(await h.database.db.connection.count({ where: { subject: "oidc:dee" } })).toBe(0);
    expect(await h.database.db.grant.findUniqueOrThrow({ where: { id: grant.id } })).toMatchObject({ revokedReason: "connection_removed" });
    // Nothing to disconnect the second time.
    expect(await h.grants.connections.disconnect("oidc:dee", "tracker", "127.0.0.1")).toBe(false);
  });
});

describe("token exchange", () => {
  it("honours an assertion until it expires, and not a moment after", async () => {
    await connect("oidc:gus", "gus-tr");
    const server = await insertClient(h.database, { id: "mab_c_issues-server", grantTypes: [TOKEN_EXCHANGE] });
    const app = await insertClient(h.database, { grantTypes: ["authorization_code"] });
    const resource = `${h.config.publicUrl}/mcp/issues`;
    const grant = await h.database.db.grant.create({
      data: {
        id: randomUUID(),
        clientId: app.id,
        subject: "oidc:gus",
        kind: "authorization_code",
        resource,
        scope: "mcp",
        ...initialDeadlines(h.config, new Date(clock.now())),
      },
    });
    const identity = { subject: "oidc:gus", user: "gus", clientId: app.id, scopes: ["mcp"], grantId: grant.id, facts: { subject: "oidc:gus" } };
    const assertion = await new IdentityAssertions(h.grants.signingKeys, h.config.publicUrl, clock).for(identity, resource);
    const ask = () =>
      h.grants.tokens.grant(presented(server), {
        grant_type: TOKEN_EXCHANGE,
        subject_token: assertion,
        subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
        resource: "tracker",
      });
    const answer = await ask();
    expect(await loginAtTracker(answer.access_token)).toBe("gus-tr");
    clock.advance(61_000);
    await expect(ask()).rejects.toMatchObject({ code: "invalid_grant", description: expect.stringContaining('"exp" claim timestamp check failed') });
  });
});
