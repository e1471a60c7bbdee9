// What access rules read about a user — verified e-mails, groups, org and team memberships — is
// kept with the upstream session from the sign-in on, rewritten by each re-check that reads it
// anew, and handed with every validated request to the MCP server side, read with the token in
// the statement that already loads its grant and session (no statement more per request). On
// SQLite and PostgreSQL, through a real OIDC issuer (the demo IdP run standalone) and the GitHub
// emulator.
import { afterAll, beforeAll, describe, expect, it, jest } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { mcpStatus } from "../support/mcp-probe.ts";
import { databaseTargets } from "../support/database-targets.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { withServerAccess } from "../support/catalogue.ts";
import { startDemoIdentityProvider, type StandaloneDemoIdentityProvider } from "../../src/demo/identity-provider.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import type { CallerIdentity } from "../../src/grants/caller-identity.ts";
import type { McpHandler } from "../../src/gateway/router.ts";

/** The issuer's accounts: claims beyond the defaults (a verified `<id>@demo.invalid`). */
const accounts = new Map<string, Record<string, unknown>>();

let idp: StandaloneDemoIdentityProvider;
beforeAll(async () => {
  idp = await startDemoIdentityProvider({ clients: [], cookieKeys: ["facts"], accountClaims: (id) => accounts.get(id) });
});
afterAll(async () => idp.close());

/** An in-process MCP server that keeps the identity of every request it is handed, by subject. */
function recordingHandler(): { handler: McpHandler; last(subject: string): CallerIdentity | undefined } {
  const seen = new Map<string, CallerIdentity>();
  return {
    handler: async (ctx, identity) => {
      if (identity.subject) seen.set(identity.subject, identity);
      ctx.body = { jsonrpc: "2.0", id: 1, result: {} };
    },
    last: (subject) => seen.get(subject),
  };
}

const RECHECK_SECONDS = 60;

describe.each(databaseTargets("the identity facts tests"))("identity facts on $name", (target) => {
  const clock = new ManualClock();
  const mcp = recordingHandler();
  let broker: TestBroker;
  let cleanup: () => Promise<void>;
  const storedRow = async (subject: string) =>
    broker.broker.database.db.upstreamSession.findFirstOrThrow({ where: { subject }, orderBy: { createdAt: "desc" } });

  beforeAll(async () => {
    const database = await target.setup();
    cleanup = database.cleanup;
    broker = await startBroker(
      {
        UPSTREAM_PROVIDER: "oidc",
        UPSTREAM_ISSUER: idp.url,
        UPSTREAM_CLIENT_ID: `broker-${target.name}`,
        UPSTREAM_CLIENT_SECRET: "issuer-secret",
        UPSTREAM_SCOPES: "openid email profile groups",
        ALLOWED_GROUPS: "mcp-users",
        UPSTREAM_RECHECK_SECONDS: String(RECHECK_SECONDS),
        DATABASE_URL: database.url,
        SECRET_KEY: randomBytes(32).toString("base64"),
      },
      // No background poll of the revocation feed: the statement counts below would catch one.
      { clock, mcpHandler: mcp.handler, revocationPollMs: 3_600_000 },
    );
    await idp.addClient({ client_id: `broker-${target.name}`, client_secret: "issuer-secret", redirect_uris: [`${broker.url}/oauth/callback`] });
  }, 60_000);
  afterAll(async () => {
    await broker?.stop();
    await cleanup?.();
  });

  it("stores the facts with the upstream session at sign-in", async () => {
    const user = `gina-${target.name}`;
    accounts.set(user, { email: "Gina@Acme.com", groups: ["mcp-users", "staff"] });
    await obtainTokens(broker.url, { user });
    const row = await storedRow(`oidc:${user}`);
    expect(JSON.parse(row.facts!)).toEqual({ verifiedEmails: ["Gina@Acme.com"], groups: ["mcp-users", "staff"], memberships: [] });
  });

  it("hands them to the MCP server side with the caller; the first request reads them with the token, cached requests read nothing", async () => {
    const user = `hugo-${target.name}`;
    accounts.set(user, { email: "hugo@acme.com", groups: ["mcp-users", "platform"] });
    const { tokens } = await obtainTokens(broker.url, { user });
    const { database } = broker.broker;
    const before = database.queryCount();
    expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    // One statement: the token with its grant and upstream session, facts included.
    expect(database.queryCount() - before).toBe(1);
    expect(mcp.last(`oidc:${user}`)?.facts).toEqual({
      subject: `oidc:${user}`,
      login: user,
      verifiedEmails: ["hugo@acme.com"],
      groups: ["mcp-users", "platform"],
      memberships: [],
    });
    const { validator } = broker.broker.services.grants;
    const hits = validator.stats.hits;
    for (let i = 0; i < 5; i++) expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    expect(validator.stats.hits - hits).toBe(5);
    expect(database.queryCount() - before).toBe(1);
    expect(mcp.last(`oidc:${user}`)?.facts.groups).toEqual(["mcp-users", "platform"]);
  });

  it("rewrites them at the re-check after the IdP's groups changed, and the next request carries them; unchanged, they are not written", async () => {
    const user = `ivan-${target.name}`;
    accounts.set(user, { groups: ["mcp-users", "staff"] });
    const { tokens } = await obtainTokens(broker.url, { user });
    expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    accounts.set(user, { groups: ["mcp-users", "platform"] });
    // Within the window the stored facts hold: the IdP is not asked again.
    expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    expect(mcp.last(`oidc:${user}`)?.facts.groups).toEqual(["mcp-users", "staff"]);
    const recorded = jest.spyOn(broker.broker.services.grants.context.hot, "recordUpstreamCheck");
    try {
      clock.advance((RECHECK_SECONDS + 1) * 1000);
      expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
      expect(mcp.last(`oidc:${user}`)?.facts.groups).toEqual(["mcp-users", "platform"]);
      expect(JSON.parse((await storedRow(`oidc:${user}`)).facts!)).toMatchObject({ groups: ["mcp-users", "platform"] });
      expect(recorded.mock.calls.at(-1)![1].facts).toBeDefined();
      // The next re-check reads the same facts: only the time of the check is written.
      clock.advance((RECHECK_SECONDS + 1) * 1000);
      expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
      expect(recorded.mock.calls).toHaveLength(2);
      expect(recorded.mock.calls[1]![1].facts).toBeUndefined();
    } finally {
      recorded.mockRestore();
    }
  });

  it("reads them at once for a session stored before they were kept, instead of deciding without them", async () => {
    const user = `jade-${target.name}`;
    accounts.set(user, { groups: ["mcp-users"] });
    const { tokens } = await obtainTokens(broker.url, { user });
    // As the migration leaves a session of an older version: no facts, checked a moment ago.
    const row = await storedRow(`oidc:${user}`);
    await broker.broker.database.db.upstreamSession.update({ where: { id: row.id }, data: { facts: null } });
    expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    expect(mcp.last(`oidc:${user}`)?.facts.groups).toEqual(["mcp-users"]);
    expect(JSON.parse((await storedRow(`oidc:${user}`)).facts!)).toEqual({ verifiedEmails: [`${user}@demo.invalid`], groups: ["mcp-users"], memberships: [] });
  });
});

describe("GitHub org and team memberships", () => {
  const clock = new ManualClock();
  const mcp = recordingHandler();
  let gh: GitHubEmulator;
  let broker: TestBroker;
  beforeAll(async () => {
    gh = await startGitHubEmulator({ clientId: "Iv1.facts", clientSecret: "facts-secret" });
    gh.addTeamMember("acme", "platform", "hubot");
    gh.addOrgMember("globex", "hubot");
    gh.setEmails("hubot", [
      { email: "hubot@acme.com", primary: true, verified: true },
      { email: "hubot@unverified.example", primary: false, verified: false },
    ]);
    // The global policy admits anyone; the server's rules name orgs and a team the provider must
    // then read all the same.
    broker = await startBroker(
      { ...gh.brokerEnv(), ALLOW_ANY_USER: "true", UPSTREAM_RECHECK_SECONDS: String(RECHECK_SECONDS) },
      {
        clock,
        mcpHandler: mcp.handler,
        configure: withServerAccess({ githubOrgs: [{ org: "acme", team: "platform" }, { org: "globex" }, { org: "initech" }] }),
      },
    );
  });
  afterAll(async () => {
    await broker?.stop();
    await gh?.close();
  });

  it("stores the memberships the rules name and the verified e-mails at sign-in, refreshes them at the re-check", async () => {
    const { tokens } = await obtainTokens(broker.url, { user: "hubot" });
    const row = await broker.broker.database.db.upstreamSession.findFirstOrThrow({ where: { login: "hubot" } });
    expect(JSON.parse(row.facts!)).toEqual({ verifiedEmails: ["hubot@acme.com"], memberships: ["acme/platform", "globex"] });
    expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    expect(mcp.last(row.subject)?.facts).toEqual({
      subject: row.subject,
      login: "hubot",
      verifiedEmails: ["hubot@acme.com"],
      groups: undefined,
      memberships: ["acme/platform", "globex"],
    });
    gh.removeOrgMember("globex", "hubot");
    clock.advance((RECHECK_SECONDS + 1) * 1000);
    expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    expect(mcp.last(row.subject)?.facts.memberships).toEqual(["acme/platform"]);
    const checked = await broker.broker.database.db.upstreamSession.findUniqueOrThrow({ where: { id: row.id } });
    expect(JSON.parse(checked.facts!)).toEqual({ verifiedEmails: ["hubot@acme.com"], memberships: ["acme/platform"] });
  });
});
