// Delegation to the upstream IdP (spec §5.6), end to end over HTTP with real upstreams on
// 127.0.0.1: the GitHub emulator and an OpenID Connect issuer (oidc-provider).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import path from "node:path";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { copyMigratedSqlite } from "../support/template-db.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { authorize, obtainTokens, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { startDemoIdentityProvider, type StandaloneDemoIdentityProvider } from "../../src/demo/identity-provider.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { until } from "../support/wait.ts";

const mcp = (t: TestBroker, token: string) =>
  fetch(`${t.url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    }),
  });

function githubEnv(gh: GitHubEmulator, extra: Record<string, string> = {}): Record<string, string> {
  return {
    ...gh.brokerEnv(),
    ALLOW_ANY_USER: "true",
    UPSTREAM_TIMEOUT_SECONDS: "1",
    ...extra,
  };
}

describe("GitHub upstream", () => {
  let gh: GitHubEmulator;
  let t: TestBroker;
  // The broker decides by this clock: a re-check window passes when the test moves it, not while
  // requests happen to be slow.
  const clock = new ManualClock();
  beforeAll(async () => {
    gh = await startGitHubEmulator({ clientId: "Iv1.broker", clientSecret: "emulator-secret" });
    t = await startBroker(githubEnv(gh, { UPSTREAM_RECHECK_SECONDS: "1" }), { clock });
  });
  afterAll(async () => {
    await t.stop();
    await gh.close();
  });
  afterEach(() => {
    gh.outage = null;
    gh.expiringTokensSeconds = undefined;
  });

  it("logs in through GitHub and maps the broker's tokens to github:<id>", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "octocat" });
    expect((await mcp(t, tokens.access_token)).status).toBe(200);
    const grant = await t.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id }, include: { upstreamSession: true } });
    expect(grant.subject).toBe("github:583231");
    expect(grant.upstreamSession).toMatchObject({ provider: "github", login: "octocat", email: "octocat@users.noreply.example", status: "active" });
  });

  it("sends a GitHub denial back to the client as access_denied", async () => {
    const client = await registerClient(t.url);
    const { callback, state } = await authorize(t.url, client, { user: "octocat", upstreamDecision: "cancel" });
    expect(callback.searchParams.get("error")).toBe("access_denied");
    expect(callback.searchParams.get("state")).toBe(state);
    expect(callback.searchParams.get("iss")).toBe(t.url);
    expect(callback.searchParams.get("code")).toBeNull();
  });

  it("refuses callbacks with an unknown state, replayed, or opened in another browser", async () => {
    const client = await registerClient(t.url);
    const browser = new HttpBrowser();
    gh.autoApprove = "octocat";
    try {
      // Stop at the broker's callback to hold the upstream answer in hand.
      const { callback: callbackAtBroker } = await authorize(t.url, client, { browser, stopAt: `${t.url}/oauth/callback` });

      const forged = await new HttpBrowser().request(`${t.url}/oauth/callback?code=x&state=forged`);
      expect(forged.status).toBe(400);
      expect(await forged.text()).toContain("does not belong to any pending authorization");

      const first = await browser.request(callbackAtBroker.href);
      expect(first.status).toBe(302);
      expect(new URL(first.headers.get("location")!).searchParams.get("code")).toMatch(/^mab_ac_/);
      const replay = await browser.request(callbackAtBroker.href);
      expect(replay.status).toBe(400);
      expect(await replay.text()).toContain("already used");
    } finally {
      gh.autoApprove = null;
    }
  });

  it("ends the sign-in when its callback is opened in another browser: the leaked URL completes nothing later", async () => {
    const client = await registerClient(t.url);
    const victim = new HttpBrowser();
    gh.autoApprove = "octocat";
    try {
      const { callback: leaked } = await authorize(t.url, client, { browser: victim, stopAt: `${t.url}/oauth/callback` });
      const attacker = await new HttpBrowser().request(leaked.href);
      expect(attacker.status).toBe(403);
      expect(await attacker.text()).toContain("another browser");
      const tx = await t.broker.database.db.authTransaction.findFirstOrThrow({ where: { clientId: client.client_id } });
      expect(tx).toMatchObject({ status: "failed", upstreamVerifierEnc: null });
      // The victim's own browser, later: nothing is completed, no grant or code exists.
      const later = await victim.request(leaked.href);
      expect(later.status).toBe(400);
      expect(later.headers.get("location")).toBeNull();
      expect(await t.broker.database.db.grant.count({ where: { clientId: client.client_id } })).toBe(0);
      const events = await t.broker.database.db.auditEvent.findMany({ where: { clientId: client.client_id, type: "login.failed" } });
      expect(events.map((e) => JSON.parse(e.detail ?? "{}") as { reason?: string }).map((d) => d.reason)).toContain("browser_mismatch");
    } finally {
      gh.autoApprove = null;
    }
  });

  it("revokes the grant when GitHub revokes the token, within the recheck window", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "hubot" });
    expect((await mcp(t, tokens.access_token)).status).toBe(200);
    gh.revokeUser("hubot");
    clock.advance(1100);
    const res = await mcp(t, tokens.access_token);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
    const grant = await t.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
    expect(grant.revokedReason).toBe("upstream_invalid");
    const refresh = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(refresh.body.error).toBe("invalid_grant");
  });

  it("with a check on every use: every request asks GitHub, the check's time is stored at most once a second", async () => {
    const everyUseClock = new ManualClock();
    const everyUse = await startBroker(githubEnv(gh, { UPSTREAM_RECHECK_SECONDS: "0" }), { clock: everyUseClock, revocationPollMs: 3_600_000 });
    try {
      const { tokens, client } = await obtainTokens(everyUse.url, { user: "every-use" });
      const grant = await everyUse.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
      const stored = () => everyUse.broker.database.db.upstreamSession.findUniqueOrThrow({ where: { id: grant.upstreamSessionId! } });
      const signedIn = await stored();
      const checksBefore = gh.count("POST /api/v3/applications/:id/token");
      const queriesBefore = everyUse.broker.database.queryCount();
      for (let i = 0; i < 3; i++) expect((await mcp(everyUse, tokens.access_token)).status).toBe(200);
      expect(gh.count("POST /api/v3/applications/:id/token")).toBe(checksBefore + 3);
      // Two statements per request: the access token, read with the upstream session the check needs
      // (nothing more is read before asking GitHub), and the binding of the MCP session it opens.
      expect(everyUse.broker.database.queryCount() - queriesBefore).toBe(6);
      // Nothing new to store within the second of the last stored check: the row is as it was.
      expect(await stored()).toEqual(signedIn);
      everyUseClock.advance(1000);
      expect((await mcp(everyUse, tokens.access_token)).status).toBe(200);
      expect((await stored()).lastCheckedAt).toEqual(new Date(everyUseClock.now()));
      // A revocation is seen by the very next request, whenever the row was last written.
      gh.revokeUser("every-use");
      const refused = await mcp(everyUse, tokens.access_token);
      expect(refused.status).toBe(401);
      expect((await everyUse.broker.database.db.grant.findUniqueOrThrow({ where: { id: grant.id } })).revokedReason).toBe("upstream_invalid");
    } finally {
      await everyUse.stop();
    }
  });

  it("refreshes an expired GitHub token transparently", async () => {
    gh.expiringTokensSeconds = 3600;
    const { tokens } = await obtainTokens(t.url, { user: "monalisa" });
    gh.expireUser("monalisa");
    // The broker learns of the expiry at its next check; make the stored expiry pass too.
    await t.broker.database.db.upstreamSession.updateMany({
      where: { login: "monalisa" },
      data: { accessExpiresAt: new Date(clock.now() - 1000), lastCheckedAt: new Date(0) },
    });
    const refreshesBefore = gh.count("POST /login/oauth/access_token");
    const res = await mcp(t, tokens.access_token);
    expect(res.status).toBe(200);
    expect(gh.count("POST /login/oauth/access_token")).toBe(refreshesBefore + 1);
    const session = await t.broker.database.db.upstreamSession.findFirstOrThrow({ where: { login: "monalisa" } });
    expect(session.accessExpiresAt!.getTime()).toBeGreaterThan(Date.now());
  });

  it("answers 503 with Retry-After during an outage and recovers by itself", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "outage-user" });
    gh.outage = "503";
    clock.advance(1100);
    const during = await mcp(t, tokens.access_token);
    expect(during.status).toBe(503);
    expect(during.headers.get("retry-after")).toMatch(/^\d+$/);
    gh.outage = "hang";
    const hung = await mcp(t, tokens.access_token);
    expect(hung.status).toBe(503);
    gh.outage = null;
    expect((await mcp(t, tokens.access_token)).status).toBe(200);
  });

  it("shares one upstream check between 50 concurrent requests on a stale session", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "single-flight" });
    clock.advance(1100);
    const before = gh.count("POST /api/v3/applications/:id/token");
    const responses = await Promise.all(Array.from({ length: 50 }, () => mcp(t, tokens.access_token)));
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(gh.count("POST /api/v3/applications/:id/token") - before).toBe(1);
  });

  it("cascades a client's revocation to every token and to GitHub", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "cascade" });
    expect((await mcp(t, tokens.access_token)).status).toBe(200);
    const deletes = gh.count("DELETE /api/v3/applications/:id/token");
    const res = await fetch(`${t.url}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: tokens.refresh_token, client_id: client.client_id }),
    });
    expect(res.status).toBe(200);
    expect((await mcp(t, tokens.access_token)).status).toBe(401);
    expect(gh.count("DELETE /api/v3/applications/:id/token")).toBe(deletes + 1);
    expect(gh.liveTokenCount("cascade")).toBe(0);
    const session = await t.broker.database.db.upstreamSession.findFirstOrThrow({ where: { login: "cascade" } });
    expect(session.status).toBe("revoked");
  });

  it("keeps no upstream token, broker token or client secret in plaintext in the database file", async () => {
    const confidential = await registerClient(t.url, { token_endpoint_auth_method: "client_secret_basic" });
    const { tokens } = await obtainTokens(t.url, { user: "plaintext", client: confidential as never });
    expect((await mcp(t, tokens.access_token)).status).toBe(200);
    const upstreamTokens = [...(gh as unknown as { tokens: Map<string, unknown> }).tokens.keys()];
    expect(upstreamTokens.length).toBeGreaterThan(0);
    await t.broker.database.db.$queryRawUnsafe("PRAGMA wal_checkpoint(TRUNCATE)");
    const files = ["broker.db", "broker.db-wal"].map((f) => path.join(t.dir, f));
    const bytes = files
      .map((f) => {
        try {
          return readFileSync(f).toString("latin1");
        } catch {
          return "";
        }
      })
      .join("");
    for (const secret of [...upstreamTokens, tokens.access_token, tokens.refresh_token, String(confidential.client_secret)]) {
      expect(bytes.includes(secret)).toBe(false);
    }
  });
});

describe("opt-in upstream token forwarding and start-up checks", () => {
  it("sends the GitHub token to the MCP server only with FORWARD_UPSTREAM_TOKEN=true", async () => {
    const gh = await startGitHubEmulator({ clientId: "Iv1.broker", clientSecret: "emulator-secret" });
    const { startDemoMcpServer } = await import("../../src/demo/mcp-server.ts");
    const server = await startDemoMcpServer();
    const t = await startBroker(githubEnv(gh, { MCP_SERVER_URL: server.url, FORWARD_UPSTREAM_TOKEN: "true" }));
    try {
      const { tokens } = await obtainTokens(t.url, { user: "forwarder" });
      expect((await mcp(t, tokens.access_token)).status).toBe(200);
      const upstream = [...(gh as unknown as { tokens: Map<string, { user: { login: string } }> }).tokens].find(([, r]) => r.user.login === "forwarder")![0];
      const last = server.requests[server.requests.length - 1]!;
      expect(last.headers["x-upstream-access-token"]).toBe(upstream);
      expect(last.headers.authorization).toBeUndefined();
    } finally {
      await t.stop();
      await server.close();
      await gh.close();
    }
  });

  it("reports an unreachable OIDC issuer at start with what to check, and still starts", async () => {
    const { Writable } = await import("node:stream");
    const { createLogger } = await import("../../src/logger.ts");
    let logs = "";
    const logger = createLogger(
      "info",
      new Writable({
        write: (c: Buffer, _e, done) => {
          logs += c.toString();
          done();
        },
      }),
    );
    const { loadConfig } = await import("../../src/config/load.ts");
    const { createBroker } = await import("../../src/broker.ts");
    const { mkdtempSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const dir = mkdtempSync(path.join(tmpdir(), "mab-issuer-"));
    // A migrated copy: this test is about the issuer, not about migrating.
    await copyMigratedSqlite(path.join(dir, "b.db"));
    const config = loadConfig(
      {
        UPSTREAM_PROVIDER: "oidc",
        ALLOW_ANY_USER: "true",
        UPSTREAM_ISSUER: "http://127.0.0.1:1/realms/x",
        // Never called here: this test is about the issuer.
        MCP_SERVER_URL: "http://127.0.0.1:1/mcp",
        UPSTREAM_CLIENT_ID: "c",
        UPSTREAM_CLIENT_SECRET: "s",
        SECRET_KEY: "k".repeat(44),
        PORT: "0",
        DATABASE_URL: `file:${path.join(dir, "b.db")}`,
      },
      dir,
    );
    const broker = await createBroker(config, { cwd: dir, logger });
    try {
      await until(() => logs.includes("check failed at start"), "the start-up check's warning");
      expect(logs).toContain("cannot reach the OIDC issuer http://127.0.0.1:1/realms/x");
      expect(logs).toContain("UPSTREAM_ISSUER");
    } finally {
      await broker.stop();
    }
  });
});

describe("timeouts", () => {
  let gh: GitHubEmulator;
  let t: TestBroker;
  const clock = new ManualClock();
  beforeAll(async () => {
    gh = await startGitHubEmulator({ clientId: "Iv1.broker", clientSecret: "emulator-secret" });
    t = await startBroker(githubEnv(gh, { SESSION_IDLE_TIMEOUT_SECONDS: "2", SESSION_MAX_AGE_SECONDS: "4" }), { clock });
  });
  afterAll(async () => {
    await t.stop();
    await gh.close();
  });

  it("kills a grant unused for the idle timeout: access (401) and refresh (invalid_grant)", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "idle" });
    expect((await mcp(t, tokens.access_token)).status).toBe(200);
    clock.advance(2300);
    const res = await mcp(t, tokens.access_token);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain("idle");
    const refresh = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(refresh.body).toMatchObject({ error: "invalid_grant" });
  });

  it("ends a grant at its maximum age however active", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "busy" });
    let current = tokens;
    for (let i = 0; i < 5; i++) {
      clock.advance(900);
      const refreshed = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: current.refresh_token, client_id: client.client_id });
      if (refreshed.status !== 200) {
        expect(refreshed.body.error).toBe("invalid_grant");
        expect(String(refreshed.body.error_description)).toContain("maximum age");
        return;
      }
      current = refreshed.body as typeof tokens;
      const status = (await mcp(t, current.access_token)).status;
      // The access token never outlives the grant: it fails with the grant.
      if (status === 401) continue;
      expect(status).toBe(200);
    }
    throw new Error("the grant outlived SESSION_MAX_AGE_SECONDS");
  });
});

describe("OpenID Connect and Google upstreams", () => {
  let idp: StandaloneDemoIdentityProvider;
  const brokers: TestBroker[] = [];
  beforeAll(async () => {
    idp = await startDemoIdentityProvider({ clients: [], cookieKeys: ["k"], accessTokenTtlSeconds: 60 });
  });
  afterAll(async () => {
    for (const b of brokers) await b.stop();
    await idp.close();
  });

  it.each([
    ["oidc", "oidc:alice"],
    ["google", "google:alice"],
  ])("logs in through %s and maps to %s", async (kind, subject) => {
    // The issuer learns the broker's callback once the broker has a port.
    const t = await startBroker({
      UPSTREAM_PROVIDER: kind,
      ALLOW_ANY_USER: "true",
      UPSTREAM_ISSUER: idp.url,
      UPSTREAM_CLIENT_ID: `broker-${kind}`,
      UPSTREAM_CLIENT_SECRET: "issuer-secret",
    });
    brokers.push(t);
    await registerAtIssuer(idp, `broker-${kind}`, `${t.url}/oauth/callback`);
    const { tokens, client } = await obtainTokens(t.url, { user: "alice" });
    expect((await mcp(t, tokens.access_token)).status).toBe(200);
    const grant = await t.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
    expect(grant.subject).toBe(subject);
  });
});

/** Registers the broker at the issuer, as an operator does in the IdP's console. */
async function registerAtIssuer(idp: StandaloneDemoIdentityProvider, clientId: string, redirectUri: string): Promise<void> {
  await idp.addClient({ client_id: clientId, client_secret: "issuer-secret", redirect_uris: [redirectUri] });
}
