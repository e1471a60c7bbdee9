// The facts GitHubProvider reads for the access policy: verified e-mails and the
// ALLOWED_GITHUB_ORGS memberships, against the GitHub emulator over real HTTP (GHES layout).
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { loadConfig } from "../../src/config/load.ts";
import { AccessPolicy } from "../../src/grants/policy.ts";
import { createUpstreamProvider } from "../../src/upstream/create.ts";
import { GitHubProvider, type GitHubProviderOptions } from "../../src/upstream/github.ts";
import type { UpstreamProvider, UpstreamTokens } from "../../src/upstream/provider.ts";
import { type GitHubEmulator, startGitHubEmulator } from "../support/github-emulator.ts";

const REDIRECT = "http://127.0.0.1:9/oauth/callback";
const WITH_ORGS = "read:user user:email read:org";
const MEMBERS = "GET /api/v3/orgs/:org/members/:user";
const TEAM = "GET /api/v3/orgs/:org/teams/:team/memberships/:user";
let gh: GitHubEmulator;

beforeAll(async () => {
  gh = await startGitHubEmulator({ clientId: "Iv1.facts", clientSecret: "facts-secret" });
});
afterAll(async () => gh.close());

// A held route is released even when its test failed on a timeout, so no later test hangs on it.
const holds: { release(): void }[] = [];
function hold(key: string) {
  const held = gh.holdRoute(key);
  holds.push(held);
  return held;
}
afterEach(() => {
  for (const held of holds.splice(0)) held.release();
});

// Every test gets its own organization and user, so the emulator's state never leaks between them.
let serial = 0;
function fresh(): { org: string; login: string } {
  serial++;
  return { org: `acme${serial}`, login: `user${serial}` };
}

function provider(overrides: Partial<GitHubProviderOptions> = {}): GitHubProvider {
  return new GitHubProvider({
    clientId: "Iv1.facts",
    clientSecret: "facts-secret",
    githubUrl: gh.url,
    apiUrl: gh.apiUrl,
    scopes: WITH_ORGS,
    timeoutMs: 2000,
    ...overrides,
  });
}

/** The whole upstream login, as the broker does it: authorize (auto-approved), callback, code exchange. */
async function signIn(p: UpstreamProvider, login: string): Promise<UpstreamTokens> {
  gh.autoApprove = login;
  const request = await p.createAuthorizationRequest(REDIRECT);
  const res = await fetch(request.url, { redirect: "manual" });
  const callbackUrl = new URL(res.headers.get("location")!);
  return p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT);
}

function policyFor(orgs: string): AccessPolicy {
  const config = loadConfig({
    UPSTREAM_PROVIDER: "github",
    UPSTREAM_CLIENT_ID: "Iv1.facts",
    UPSTREAM_CLIENT_SECRET: "facts-secret",
    ALLOWED_GITHUB_ORGS: orgs,
    SECRET_KEY: "a".repeat(64),
  });
  return new AccessPolicy(config.accessPolicy);
}

describe("GitHub org and team memberships", () => {
  it("admits an org member as the org rule, and only that rule", async () => {
    const { org, login } = fresh();
    gh.addOrgMember(org, login);
    const p = provider({ orgRules: [{ org }, { org, team: "platform" }, { org: `${org}-other` }] });
    const identity = await p.fetchIdentity(await signIn(p, login));
    expect(identity.memberships).toEqual([org]);
    expect(policyFor(`${org},${org}/platform`).decide(identity)).toEqual({ admitted: true, rule: `ALLOWED_GITHUB_ORGS ${org}` });
  });

  it("admits an active team member as org/team", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    const p = provider({
      orgRules: [
        { org, team: "platform" },
        { org, team: "security" },
      ],
    });
    const identity = await p.fetchIdentity(await signIn(p, login));
    expect(identity.memberships).toEqual([`${org}/platform`]);
    expect(policyFor(`${org}/platform`).decide(identity)).toEqual({ admitted: true, rule: `ALLOWED_GITHUB_ORGS ${org}/platform` });
  });

  it("lists the rules as written, whatever the case GitHub uses", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    const written = org.toUpperCase();
    const p = provider({ orgRules: [{ org: written }, { org: written, team: "Platform" }] });
    expect((await p.fetchIdentity(await signIn(p, login))).memberships).toEqual([written, `${written}/Platform`]);
  });

  it("does not count a pending team membership (an invitation not accepted yet)", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login, { state: "pending" });
    const p = provider({ orgRules: [{ org, team: "platform" }, { org }] });
    const tokens = await signIn(p, login);
    const before = gh.count(TEAM);
    const identity = await p.fetchIdentity(tokens);
    expect(gh.count(TEAM)).toBe(before + 1);
    expect(identity.memberships).toEqual([]);
    expect(policyFor(`${org}/platform`).decide(identity)).toMatchObject({ admitted: false });
    // The same call sees the membership once the invitation is accepted.
    gh.addTeamMember(org, "platform", login);
    expect((await p.fetchIdentity(tokens)).memberships).toEqual([`${org}/platform`, org]);
  });

  it("sees a removal from the org or the team at the next fetchIdentity, with the same token", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    const p = provider({ orgRules: [{ org }, { org, team: "platform" }] });
    const tokens = await signIn(p, login);
    expect((await p.fetchIdentity(tokens)).memberships).toEqual([org, `${org}/platform`]);
    gh.removeTeamMember(org, "platform", login);
    expect((await p.fetchIdentity(tokens)).memberships).toEqual([org]);
    gh.removeOrgMember(org, login);
    const after = await p.fetchIdentity(tokens);
    expect(after.memberships).toEqual([]);
    expect(policyFor(`${org},${org}/platform`).decide(after)).toMatchObject({ admitted: false });
  });

  it("sees no private membership with a token that lacks read:org, not even a public one", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    const p = provider({ scopes: "read:user user:email", orgRules: [{ org }, { org, team: "platform" }] });
    const tokens = await signIn(p, login);
    expect(tokens.scope).toBe("read:user user:email");
    const before = { members: gh.count(MEMBERS), team: gh.count(TEAM) };
    expect((await p.fetchIdentity(tokens)).memberships).toEqual([]);
    // The calls were made and answered (302 to public_members, 404): nothing was skipped.
    expect(gh.count(MEMBERS)).toBe(before.members + 1);
    expect(gh.count(TEAM)).toBe(before.team + 1);
    // The 302 is not followed: a public membership seen without read:org is not what the rule asks.
    gh.addOrgMember(org, login, { public: true });
    expect((await p.fetchIdentity(tokens)).memberships).toEqual([]);
    expect(gh.count("GET /api/v3/orgs/:org/public_members/:user")).toBe(0);
  });

  it("reads every membership at once, not one after the other", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    const p = provider({ orgRules: [{ org }, { org, team: "platform" }] });
    const tokens = await signIn(p, login);
    const members = hold(MEMBERS);
    const team = hold(TEAM);
    const identity = p.fetchIdentity(tokens);
    try {
      // Both requests reach GitHub while neither has been answered.
      await Promise.all([members.arrived(1), team.arrived(1)]);
    } finally {
      members.release();
      team.release();
    }
    expect((await identity).memberships).toEqual([org, `${org}/platform`]);
  }, 5000);

  it("makes no membership call without org rules", async () => {
    const { login } = fresh();
    const p = provider();
    const tokens = await signIn(p, login);
    const before = gh.count(MEMBERS) + gh.count(TEAM);
    expect((await p.fetchIdentity(tokens)).memberships).toEqual([]);
    expect(gh.count(MEMBERS) + gh.count(TEAM)).toBe(before);
  });
});

describe("when GitHub refuses or fails a membership call", () => {
  async function member(route: string, status: number) {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    const p = provider({ orgRules: [{ org }, { org, team: "platform" }] });
    const tokens = await signIn(p, login);
    gh.failRoute(route, status);
    try {
      return await p.fetchIdentity(tokens).catch((err: unknown) => err);
    } finally {
      gh.failRoute(route, null);
    }
  }

  it("401 on either call: the token is dead (invalid_grant)", async () => {
    expect(await member(MEMBERS, 401)).toMatchObject({ name: "UpstreamError", kind: "invalid_grant" });
    expect(await member(TEAM, 401)).toMatchObject({ name: "UpstreamError", kind: "invalid_grant" });
  });

  it("503 or 500: unavailable, never 'not a member'", async () => {
    expect(await member(MEMBERS, 503)).toMatchObject({ name: "UpstreamError", kind: "unavailable" });
    expect(await member(TEAM, 500)).toMatchObject({ name: "UpstreamError", kind: "unavailable" });
  });

  it("a rate limit (403 or 429 with x-ratelimit-remaining 0): unavailable, never 'not a member'", async () => {
    expect(await member(MEMBERS, 403)).toMatchObject({ name: "UpstreamError", kind: "unavailable" });
    expect(await member(TEAM, 429)).toMatchObject({ name: "UpstreamError", kind: "unavailable" });
  });

  it("no answer within the timeout: unavailable", async () => {
    const { org, login } = fresh();
    gh.addOrgMember(org, login);
    const p = provider({ timeoutMs: 300, orgRules: [{ org }] });
    const tokens = await signIn(p, login);
    const held = hold(MEMBERS);
    try {
      await expect(p.fetchIdentity(tokens)).rejects.toMatchObject({ kind: "unavailable" });
    } finally {
      held.release();
    }
  });

  it("403 for SAML SSO: not a member, logged with the rule and GitHub's message but no token or SSO link", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    gh.addOrgMember(`${org}-open`, login);
    gh.requireSamlSso(org);
    const logged: { fields: Record<string, unknown>; message: string }[] = [];
    const p = provider({
      orgRules: [{ org }, { org, team: "platform" }, { org: `${org}-open` }],
      log: { warn: (fields, message) => logged.push({ fields, message }) },
    });
    const tokens = await signIn(p, login);
    const identity = await p.fetchIdentity(tokens);
    expect(identity.memberships).toEqual([`${org}-open`]);
    expect(logged.map((l) => l.fields)).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ rule: org, login, status: 403, samlSso: true, githubMessage: expect.stringContaining("SAML") }),
        expect.objectContaining({ rule: `${org}/platform`, status: 403, samlSso: true }),
      ]),
    );
    expect(logged).toHaveLength(2);
    const text = JSON.stringify(logged);
    expect(text).not.toContain(tokens.accessToken);
    expect(text).not.toContain("authorization_request");
    gh.requireSamlSso(org, false);
    expect((await p.fetchIdentity(tokens)).memberships).toEqual([org, `${org}/platform`, `${org}-open`]);
  });
});

describe("verified e-mails", () => {
  it("keeps every verified address as GitHub wrote it (the policy folds the case), and never an unverified one, even the primary", async () => {
    const { login } = fresh();
    gh.setEmails(login, [
      { email: "Carol@Acme.example", primary: true, verified: false, visibility: "private" },
      { email: "carol@Personal.example", primary: false, verified: true, visibility: null },
      { email: "CAROL@corp.example", primary: false, verified: true, visibility: null },
      { email: "carol@typo.example", primary: false, verified: false, visibility: null },
    ]);
    const p = provider();
    const identity = await p.fetchIdentity(await signIn(p, login));
    expect(identity.verifiedEmails).toEqual(["carol@Personal.example", "CAROL@corp.example"]);
    // The unverified primary is not shown as the user's e-mail either.
    expect(identity.email).toBeUndefined();
    const config = loadConfig({
      UPSTREAM_PROVIDER: "github",
      UPSTREAM_CLIENT_ID: "Iv1.facts",
      UPSTREAM_CLIENT_SECRET: "facts-secret",
      ALLOWED_EMAIL_DOMAINS: "acme.example",
      SECRET_KEY: "a".repeat(64),
    });
    expect(new AccessPolicy(config.accessPolicy).decide(identity)).toMatchObject({ admitted: false });
  });

  it("takes the verified primary as the e-mail", async () => {
    const { login } = fresh();
    gh.setEmails(login, [
      { email: "dave@old.example", primary: false, verified: true },
      { email: "Dave@New.example", primary: true, verified: true },
    ]);
    const p = provider();
    const identity = await p.fetchIdentity(await signIn(p, login));
    expect(identity.email).toBe("Dave@New.example");
    expect(identity.verifiedEmails).toEqual(["dave@old.example", "Dave@New.example"]);
  });

  it("reads no e-mails with a token that may not (read:user only)", async () => {
    const { login } = fresh();
    const p = provider({ scopes: "read:user" });
    const tokens = await signIn(p, login);
    const before = gh.count("GET /api/v3/user/emails");
    expect((await p.fetchIdentity(tokens)).verifiedEmails).toEqual([]);
    expect(gh.count("GET /api/v3/user/emails")).toBe(before);
  });

  it("a 401 or 503 from /user/emails is the right error, not an empty list", async () => {
    const { login } = fresh();
    const p = provider();
    const tokens = await signIn(p, login);
    for (const [status, kind] of [
      [401, "invalid_grant"],
      [503, "unavailable"],
    ] as const) {
      gh.failRoute("GET /api/v3/user/emails", status);
      try {
        await expect(p.fetchIdentity(tokens)).rejects.toMatchObject({ kind });
      } finally {
        gh.failRoute("GET /api/v3/user/emails", null);
      }
    }
  });
});

describe("through createUpstreamProvider with a GHES configuration", () => {
  it("asks for read:org itself and reads the memberships under GHES's /api/v3", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login);
    const config = loadConfig({
      ...gh.brokerEnv(),
      ALLOWED_GITHUB_ORGS: `${org},${org}/platform,${org}/other`,
      SECRET_KEY: "a".repeat(64),
    });
    const p = createUpstreamProvider(config.upstream, { policy: config.accessPolicy });
    const url = new URL((await p.createAuthorizationRequest(REDIRECT)).url);
    expect(url.origin + url.pathname).toBe(`${gh.url}/login/oauth/authorize`);
    expect(url.searchParams.get("scope")!.split(" ")).toEqual(expect.arrayContaining(["read:user", "user:email", "read:org"]));
    const before = { members: gh.count(MEMBERS), team: gh.count(TEAM) };
    const identity = await p.fetchIdentity(await signIn(p, login));
    expect(identity.memberships).toEqual([org, `${org}/platform`]);
    expect(gh.count(MEMBERS)).toBe(before.members + 1);
    expect(gh.count(TEAM)).toBe(before.team + 2);
    expect(new AccessPolicy(config.accessPolicy).decide(identity)).toEqual({ admitted: true, rule: `ALLOWED_GITHUB_ORGS ${org}` });
  });

  it("without org rules, asks for no read:org", async () => {
    const config = loadConfig({
      ...gh.brokerEnv(),
      ALLOWED_USERS: "octocat",
      SECRET_KEY: "a".repeat(64),
    });
    const p = createUpstreamProvider(config.upstream, { policy: config.accessPolicy });
    const url = new URL((await p.createAuthorizationRequest(REDIRECT)).url);
    expect(url.searchParams.get("scope")!.split(" ")).not.toContain("read:org");
  });
});

describe("the emulator answers as GitHub does", () => {
  async function token(login: string, scopes: string): Promise<string> {
    return (await signIn(provider({ scopes }), login)).accessToken;
  }
  const get = (path: string, accessToken?: string) =>
    fetch(`${gh.apiUrl}${path}`, { redirect: "manual", headers: accessToken ? { Authorization: `Bearer ${accessToken}` } : {} });

  it("org membership: 204 / 404 for a member with read:org, 302 to public_members otherwise", async () => {
    const { org, login } = fresh();
    gh.addOrgMember(org, login);
    const withOrg = await token(login, WITH_ORGS);
    expect((await get(`/orgs/${org}/members/${login}`, withOrg)).status).toBe(204);
    const other = await get(`/orgs/${org}/members/nobody-${login}`, withOrg);
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ message: expect.any(String) });
    const redirect = await get(`/orgs/${org}/members/${login}`, await token(login, "read:user"));
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get("location")).toBe(`${gh.apiUrl}/orgs/${org}/public_members/${login}`);
    expect((await get(`/orgs/${org}/public_members/${login}`)).status).toBe(404);
    gh.addOrgMember(org, login, { public: true });
    expect((await get(`/orgs/${org}/public_members/${login}`)).status).toBe(204);
    expect((await get(`/orgs/${org}/members/${login}`, "gho_unknown")).status).toBe(401);
  });

  it("team membership: 200 with state and role, 404 without read:org", async () => {
    const { org, login } = fresh();
    gh.addTeamMember(org, "platform", login, { role: "maintainer" });
    const res = await get(`/orgs/${org}/teams/platform/memberships/${login}`, await token(login, WITH_ORGS));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ url: expect.stringContaining("/memberships/"), role: "maintainer", state: "active" });
    expect((await get(`/orgs/${org}/teams/platform/memberships/${login}`, await token(login, "read:user"))).status).toBe(404);
  });

  it("/user/orgs: the caller's orgs with read:org (or user), 403 with neither", async () => {
    const { org, login } = fresh();
    gh.addOrgMember(org, login);
    gh.addOrgMember(`${org}-b`, login, { public: true });
    const res = await get("/user/orgs", await token(login, WITH_ORGS));
    expect(res.status).toBe(200);
    const orgs = (await res.json()) as { login: string; id: number }[];
    expect(orgs.map((o) => o.login).sort()).toEqual([org, `${org}-b`]);
    expect(orgs[0]).toMatchObject({ id: expect.any(Number), url: expect.stringContaining("/api/v3/orgs/") });
    expect((await get("/user/orgs", await token(login, "user"))).status).toBe(200);
    expect((await get("/user/orgs", await token(login, "read:user user:email"))).status).toBe(403);
  });

  it("/user/emails: GitHub's entries, only with user:email or user", async () => {
    const { login } = fresh();
    gh.setEmails(login, [{ email: "x@y.example", primary: true, verified: false, visibility: "private" }]);
    const res = await get("/user/emails", await token(login, "user:email"));
    expect(await res.json()).toEqual([{ email: "x@y.example", primary: true, verified: false, visibility: "private" }]);
    expect((await get("/user/emails", await token(login, "read:user"))).status).toBe(404);
  });
});
