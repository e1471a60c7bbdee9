// The access policy as a pure decision, and the variables that configure it: every rule kind,
// globs, case, verified-only e-mail, several rules, and the mistakes refused at start.
import { describe, expect, it } from "@jest/globals";
import { AccessPolicy, type IdentityFacts } from "../../src/grants/policy.ts";
import { parseAccessPolicy } from "../../src/access-policy-config.ts";
import { ConfigError } from "../../src/config-values.ts";
import type { UpstreamKind } from "../../src/config.ts";

const policyOf = (env: Record<string, string>, provider: UpstreamKind = "github") =>
  new AccessPolicy(parseAccessPolicy(env, provider, env.ALLOW_ANY_USER === "true"));

const octocat: IdentityFacts = { subject: "github:583231", login: "octocat", verifiedEmails: ["octo@github.com"], memberships: [] };

describe("ALLOWED_USERS", () => {
  const policy = policyOf({ ALLOWED_USERS: "OctoCat, github:1*, *@Acme.com, bot-*" });
  it.each<[string, IdentityFacts, boolean]>([
    ["a login, any case", octocat, true],
    ["a subject glob", { subject: "github:17", login: "someone" }, true],
    ["a subject is compared with its case", { subject: "GITHUB:17", login: "someone" }, false],
    ["a verified e-mail glob, any case", { subject: "oidc:a", login: "a", verifiedEmails: ["alice@acme.COM"] }, true],
    ["an e-mail pattern never matches the login", { subject: "oidc:b", login: "bob@acme.com", verifiedEmails: [] }, false],
    ["a glob matches only whole values", { subject: "oidc:c", login: "c", verifiedEmails: ["c@acme.com.evil.example"] }, false],
    ["a login glob", { subject: "github:99", login: "bot-deploy" }, true],
    ["nothing matches", { subject: "github:2", login: "hubot", verifiedEmails: ["hubot@github.com"] }, false],
  ])("%s", (_name, facts, admitted) => {
    expect(policy.decide(facts).admitted).toBe(admitted);
  });

  it("names the rule that admitted, and says why not otherwise", () => {
    expect(policy.decide(octocat)).toEqual({ admitted: true, rule: "ALLOWED_USERS OctoCat" });
    expect(policy.decide({ subject: "github:2", login: "hubot" })).toEqual({ admitted: false, reason: "no access rule admits this account" });
  });

  it("admits machine clients only by their subject", () => {
    const named = policyOf({ ALLOWED_USERS: "client:abc" });
    expect(named.decide({ subject: "client:abc" }).admitted).toBe(true);
    expect(named.decide({ subject: "client:abd" }).admitted).toBe(false);
    expect(policyOf({ ALLOWED_EMAIL_DOMAINS: "acme.com" }).decide({ subject: "client:abc" }).admitted).toBe(false);
  });
});

describe("the other rules, and several at once", () => {
  it("ALLOWED_EMAIL_DOMAINS: verified addresses whose domain is exactly one of them", () => {
    const policy = policyOf({ ALLOWED_EMAIL_DOMAINS: "@ACME.com,acme.org" });
    expect(policy.decide({ subject: "x", verifiedEmails: ["x@acme.com"] }).admitted).toBe(true);
    expect(policy.decide({ subject: "x", verifiedEmails: ["x@Acme.Org"] }).admitted).toBe(true);
    expect(policy.decide({ subject: "x", verifiedEmails: ["x@eu.acme.com"] }).admitted).toBe(false);
    expect(policy.decide({ subject: "x", verifiedEmails: ["x@notacme.com"] }).admitted).toBe(false);
  });

  it("ALLOWED_GITHUB_ORGS: the memberships the provider found, org or org/team", () => {
    const policy = policyOf({ ALLOWED_GITHUB_ORGS: "acme,Acme/Platform" });
    expect(policy.decide({ subject: "github:1", memberships: ["acme"] })).toEqual({ admitted: true, rule: "ALLOWED_GITHUB_ORGS acme" });
    expect(policy.decide({ subject: "github:1", memberships: ["acme/platform"] }).admitted).toBe(true);
    expect(policy.decide({ subject: "github:1", memberships: ["other"] }).admitted).toBe(false);
    expect(policy.decide({ subject: "github:1", memberships: [] }).admitted).toBe(false);
  });

  it("ALLOWED_GROUPS: exact group names", () => {
    const policy = policyOf({ ALLOWED_GROUPS: "/mcp/users,Admins" }, "oidc");
    expect(policy.decide({ subject: "oidc:1", groups: ["staff", "/mcp/users"] }).admitted).toBe(true);
    expect(policy.decide({ subject: "oidc:1", groups: ["admins"] }).admitted).toBe(false);
    expect(policy.decide({ subject: "oidc:1" }).admitted).toBe(false);
  });

  it("any rule admits", () => {
    const policy = policyOf({ ALLOWED_USERS: "hubot", ALLOWED_EMAIL_DOMAINS: "acme.com", ALLOWED_GITHUB_ORGS: "acme" });
    expect(policy.decide({ subject: "github:2", login: "hubot" }).admitted).toBe(true);
    expect(policy.decide({ subject: "github:3", login: "x", verifiedEmails: ["x@acme.com"] }).admitted).toBe(true);
    expect(policy.decide({ subject: "github:4", login: "y", memberships: ["acme"] }).admitted).toBe(true);
    expect(policy.decide({ subject: "github:5", login: "z", verifiedEmails: ["z@other.com"], memberships: [] }).admitted).toBe(false);
  });

  it("ALLOW_ANY_USER admits everyone; demo mode without rules too, with rules only whom they name", () => {
    expect(policyOf({ ALLOW_ANY_USER: "true" }).decide({ subject: "github:9" })).toEqual({ admitted: true, rule: "ALLOW_ANY_USER" });
    expect(policyOf({}, "demo").decide({ subject: "demo:zoe" }).admitted).toBe(true);
    const ruled = policyOf({ ALLOWED_USERS: "alice" }, "demo");
    expect(ruled.decide({ subject: "demo:alice", login: "alice" }).admitted).toBe(true);
    expect(ruled.decide({ subject: "demo:zoe", login: "zoe" }).admitted).toBe(false);
  });

  it("describes itself for check", () => {
    expect(policyOf({ ALLOWED_GROUPS: "a,b", UPSTREAM_GROUPS_CLAIM: "roles" }, "oidc").describe()).toEqual(["groups (claim roles): a, b"]);
    expect(policyOf({ ALLOW_ANY_USER: "true", ALLOWED_USERS: "x" }).describe()).toEqual(["anyone who can sign in at the identity provider (ALLOW_ANY_USER)"]);
  });
});

describe("configuration mistakes are refused with one line", () => {
  it.each<[Record<string, string>, UpstreamKind, string, RegExp]>([
    [{}, "github", "ALLOWED_USERS", /ALLOWED_GITHUB_ORGS .*ALLOW_ANY_USER=true to admit anyone with a GitHub account/],
    [{}, "oidc", "ALLOWED_USERS", /ALLOWED_GROUPS \(with UPSTREAM_GROUPS_CLAIM\)/],
    [{ ALLOWED_USERS: "*" }, "github", "ALLOWED_USERS", /ALLOW_ANY_USER=true/],
    [{ ALLOWED_USERS: "a b" }, "github", "ALLOWED_USERS", /without spaces/],
    [{ ALLOWED_EMAIL_DOMAINS: "acme" }, "github", "ALLOWED_EMAIL_DOMAINS", /acme\.com/],
    [{ ALLOWED_GITHUB_ORGS: "acme/a/b" }, "github", "ALLOWED_GITHUB_ORGS", /acme\/platform/],
    [{ ALLOWED_GITHUB_ORGS: "acme" }, "oidc", "ALLOWED_GITHUB_ORGS", /UPSTREAM_PROVIDER=github/],
    [{ ALLOWED_GROUPS: "admins" }, "github", "ALLOWED_GROUPS", /ALLOWED_GITHUB_ORGS/],
  ])("%j with %s → %s", (env, provider, variable, message) => {
    let error: unknown;
    try {
      parseAccessPolicy(env, provider, false);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).variable).toBe(variable);
    expect((error as ConfigError).message).toMatch(message);
    expect((error as ConfigError).message).not.toContain("\n");
  });
});
