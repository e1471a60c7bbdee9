// The access policy as a pure decision, and the variables that configure it: every rule kind,
// globs, case, verified-only e-mail, several rules, and the mistakes refused at start.
import { describe, expect, it } from "@jest/globals";
import { AccessPolicy, type IdentityFacts } from "../../src/grants/policy.ts";
import { parseAccessPolicy } from "../../src/config/access-policy.ts";
import { ConfigError } from "../../src/config/values.ts";
import type { UpstreamKind } from "../../src/config/load.ts";

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

  it("ALLOW_ANY_USER speaks of people: a machine client still needs its name (README: Who may sign in)", () => {
    const anyone = policyOf({ ALLOW_ANY_USER: "true" });
    expect(anyone.decide({ subject: "client:abc" })).toEqual({ admitted: false, reason: "no access rule admits this account" });
    expect(anyone.decide({ subject: "github:9" }).admitted).toBe(true);
    const named = policyOf({ ALLOW_ANY_USER: "true", ALLOWED_USERS: "client:abc" });
    expect(named.decide({ subject: "client:abc" })).toEqual({ admitted: true, rule: "ALLOWED_USERS client:abc" });
    expect(named.decide({ subject: "client:abd" }).admitted).toBe(false);
    expect(named.decide({ subject: "github:9" })).toEqual({ admitted: true, rule: "ALLOW_ANY_USER" });
    expect(policyOf({ ALLOW_ANY_USER: "true", ALLOWED_USERS: "client:*" }).decide({ subject: "client:abd" }).admitted).toBe(true);
    // Demo mode without rules is open to everyone, machine clients included (anyone can be anyone there).
    expect(policyOf({}, "demo").decide({ subject: "client:abc" }).admitted).toBe(true);
    expect(policyOf({ ALLOWED_USERS: "alice" }, "demo").decide({ subject: "client:abc" }).admitted).toBe(false);
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
    expect(policyOf({ ALLOW_ANY_USER: "true", ALLOWED_USERS: "x,client:abc" }).describe()).toEqual([
      "anyone who can sign in at the identity provider (ALLOW_ANY_USER)",
      "machine clients: client:abc",
    ]);
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

describe("look-alike characters are not the ASCII letters they fold to", () => {
  // Unicode case folding (toLowerCase(), the `iu` regular-expression flags) makes U+212A KELVIN
  // SIGN equal "k" and U+017F LONG S equal "s": a user who picks such a login or address at an IdP
  // that lets them choose would be admitted under someone else's rule.
  const KELVIN = "\u212A";
  const LONG_S = "\u017F";

  it.each<[string, Record<string, string>, IdentityFacts]>([
    ["a login with a Kelvin sign", { ALLOWED_USERS: "kevin" }, { subject: "oidc:1", login: `${KELVIN}evin` }],
    ["a login with a long s", { ALLOWED_USERS: "sam" }, { subject: "oidc:2", login: `${LONG_S}am` }],
    ["a login glob", { ALLOWED_USERS: "sam-*" }, { subject: "oidc:3", login: `${LONG_S}am-ops` }],
    ["a verified e-mail against an e-mail glob", { ALLOWED_USERS: "*@kaka.com" }, { subject: "oidc:4", verifiedEmails: [`x@${KELVIN}aka.com`] }],
    ["a verified e-mail against ALLOWED_EMAIL_DOMAINS", { ALLOWED_EMAIL_DOMAINS: "kaka.com" }, { subject: "oidc:5", verifiedEmails: [`x@${KELVIN}aka.com`] }],
    ["a long s in a domain", { ALLOWED_EMAIL_DOMAINS: "acme.sh" }, { subject: "oidc:6", verifiedEmails: [`x@acme.${LONG_S}h`] }],
    ["an organization membership", { ALLOWED_GITHUB_ORGS: "kaka" }, { subject: "github:7", memberships: [`${KELVIN}aka`] }],
  ])("%s is refused", (_name, env, facts) => {
    const policy = policyOf(env, env.ALLOWED_GITHUB_ORGS ? "github" : "oidc");
    expect(policy.decide(facts)).toEqual({ admitted: false, reason: "no access rule admits this account" });
  });

  it("the ASCII letters themselves still match in any case", () => {
    const policy = policyOf({ ALLOWED_USERS: "kevin,sam-*,*@kaka.com", ALLOWED_EMAIL_DOMAINS: "acme.sh" }, "oidc");
    expect(policy.decide({ subject: "oidc:1", login: "KEVIN" })).toEqual({ admitted: true, rule: "ALLOWED_USERS kevin" });
    expect(policy.decide({ subject: "oidc:2", login: "Sam-Ops" })).toEqual({ admitted: true, rule: "ALLOWED_USERS sam-*" });
    expect(policy.decide({ subject: "oidc:3", verifiedEmails: ["X@KAKA.COM"] })).toEqual({ admitted: true, rule: "ALLOWED_USERS *@kaka.com" });
    expect(policy.decide({ subject: "oidc:4", verifiedEmails: ["x@ACME.SH"] })).toEqual({ admitted: true, rule: "ALLOWED_EMAIL_DOMAINS acme.sh" });
  });

  it("other characters match only themselves", () => {
    const policy = policyOf({ ALLOWED_USERS: "josé,*@bücher.example" }, "oidc");
    expect(policy.decide({ subject: "oidc:1", login: "JOSé" }).admitted).toBe(true);
    expect(policy.decide({ subject: "oidc:1", login: "JOSÉ" }).admitted).toBe(false);
    expect(policy.decide({ subject: "oidc:2", verifiedEmails: ["a@bücher.example"] }).admitted).toBe(true);
    expect(policy.decide({ subject: "oidc:2", verifiedEmails: ["a@BÜCHER.example"] }).admitted).toBe(false);
  });

  it("an ALLOWED_EMAIL_DOMAINS entry that only lower-cases to ASCII is refused at start", () => {
    expect(() => policyOf({ ALLOWED_EMAIL_DOMAINS: `${KELVIN}aka.com` })).toThrow(ConfigError);
    expect(() => policyOf({ ALLOWED_EMAIL_DOMAINS: "KAKA.com" })).not.toThrow();
  });
});

describe("a glob cannot hold the event loop", () => {
  // A backtracking regular expression took 14.6 s for ALLOWED_USERS=*.*.*@acme.com against a
  // verified e-mail of 4,000 characters, and 61.7 s for *a*a*a*a*a*a*@acme.com against 100, on the
  // event loop. Every decision below is its own event-loop turn: should matching ever backtrack
  // again, Jest's timeout fires at the next turn and the test fails instead of passing slowly.
  const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
  const decideAlone = async (policy: AccessPolicy, facts: IdentityFacts) => {
    await turn();
    const decision = policy.decide(facts);
    await turn();
    return decision.admitted;
  };

  it("the trial's inputs are decided, and right", async () => {
    const dots = policyOf({ ALLOWED_USERS: "*.*.*@acme.com" });
    const stars = policyOf({ ALLOWED_USERS: "*a*a*a*a*a*a*@acme.com" });
    // 4,000 characters: longer than any e-mail address (320), so never a match, even when it fits.
    expect(await decideAlone(dots, { subject: "github:1", verifiedEmails: [`${"a.".repeat(1995)}@acme.co`] })).toBe(false);
    expect(await decideAlone(dots, { subject: "github:1", verifiedEmails: [`${"a.".repeat(1995)}@acme.com`] })).toBe(false);
    expect(await decideAlone(stars, { subject: "github:2", verifiedEmails: ["a".repeat(100)] })).toBe(false);
    expect(await decideAlone(stars, { subject: "github:2", verifiedEmails: [`${"a".repeat(100)}@acme.com`] })).toBe(true);
  });

  it("values longer than their kind allows never match", () => {
    const policy = policyOf({ ALLOWED_USERS: "*.*.*@acme.com,*a*a*a*a*a*a*@acme.com,*-bot,github:*2" });
    const admits = (facts: IdentityFacts) => policy.decide(facts).admitted;
    expect(admits({ subject: "github:1", verifiedEmails: [`${"a.".repeat(155)}@acme.com`] })).toBe(true); // 319 characters
    expect(admits({ subject: "github:1", verifiedEmails: [`${"a".repeat(311)}@acme.com`] })).toBe(true); // 320
    expect(admits({ subject: "github:1", verifiedEmails: [`${"a".repeat(312)}@acme.com`] })).toBe(false); // 321
    expect(admits({ subject: "github:1", login: `${"a".repeat(252)}-bot` })).toBe(true); // 256
    expect(admits({ subject: "github:1", login: `${"a".repeat(253)}-bot` })).toBe(false); // 257
    expect(admits({ subject: `github:${"1".repeat(312)}2` })).toBe(true); // 320
    expect(admits({ subject: `github:${"1".repeat(313)}2` })).toBe(false); // 321
  });

  it("matches globs as globs: pieces in order, anchored at both ends", () => {
    const policy = policyOf({ ALLOWED_USERS: "a*b*c,*x*x*,ab**ba" });
    const admits = (login: string) => policy.decide({ subject: "github:1", login }).admitted;
    expect(["abc", "a-b-c", "abbc", "ABC", "axxb", "xx", "x-x", "abba", "ab-ba"].map(admits)).toEqual([true, true, true, true, true, true, true, true, true]);
    expect(["ab", "bc", "acb", "abcd", "zabc", "x", "aba", "abx", "xab"].map(admits)).toEqual([false, false, false, false, false, false, false, false, false]);
  });
});
