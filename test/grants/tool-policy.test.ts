// Permissions per tool as a pure decision: rules in order (the first whose glob names the tool
// decides), `deny`, `allow` (the access policy's own comparisons), `requireScope` with the server's
// implications, and what tools/list may show. For each permission, who must not get it.
import { describe, expect, it } from "@jest/globals";
import type { AccessRules, ToolRule } from "../../src/config/catalogue.ts";
import type { IdentityFacts } from "../../src/grants/policy.ts";
import { type ToolCaller, ToolPolicy } from "../../src/grants/tool-policy.ts";

const NOBODY: AccessRules = { users: [], emailDomains: [], githubOrgs: [], groups: [] };
const caller = (facts: IdentityFacts, scopes: string[] = ["mcp", "docs:read"]): ToolCaller => ({ facts, scopes });

const platformAlice = caller({ subject: "oidc:alice", login: "alice", verifiedEmails: ["alice@acme.com"], groups: ["platform"] });
const salesBob = caller({ subject: "oidc:bob", login: "bob", verifiedEmails: ["bob@acme.com"], groups: ["sales"] });

// The issue's own example, in the order a careful operator writes it.
const EXAMPLE: ToolRule[] = [
  { match: "delete_*", allow: { ...NOBODY, groups: ["platform"] } },
  { match: "admin_*", deny: true },
  { match: "*", requireScope: "docs:read" },
];

describe("rules in order", () => {
  const policy = new ToolPolicy(EXAMPLE);

  it("the first rule whose glob names the tool decides, and names itself for the audit log", () => {
    expect(policy.decide("delete_page", platformAlice)).toEqual({ allowed: true });
    expect(policy.decide("delete_page", salesBob)).toEqual({ allowed: false, reason: "not-allowed", rule: "#1 delete_*" });
    expect(policy.decide("admin_reset", platformAlice)).toEqual({ allowed: false, reason: "denied", rule: "#2 admin_*" });
    expect(policy.decide("read_page", salesBob)).toEqual({ allowed: true });
  });

  it("a later rule never speaks for a tool an earlier one matched", () => {
    // delete_* admits platform before `*` would ask for docs:read: Alice without the scope passes.
    expect(policy.decide("delete_page", caller(platformAlice.facts, ["mcp"]))).toEqual({ allowed: true });
    // The same rules the other way round: `*` matches everything first.
    const reversed = new ToolPolicy([...EXAMPLE].reverse());
    expect(reversed.decide("admin_reset", platformAlice)).toEqual({ allowed: true });
    expect(reversed.decide("delete_page", salesBob)).toEqual({ allowed: true });
  });

  it("a tool no rule names may be called by anyone the server admitted", () => {
    const policy = new ToolPolicy([{ match: "admin_*", deny: true }]);
    expect(policy.decide("search", salesBob)).toEqual({ allowed: true });
    expect(policy.decide("search", caller({ subject: "client:ci" }, []))).toEqual({ allowed: true });
  });

  it("a rule with neither allow nor requireScope lets through what it matches, ahead of later rules", () => {
    const policy = new ToolPolicy([{ match: "admin_status" }, { match: "admin_*", deny: true }]);
    expect(policy.decide("admin_status", salesBob)).toEqual({ allowed: true });
    expect(policy.decide("admin_reset", salesBob).allowed).toBe(false);
  });
});

describe("globs over tool names", () => {
  it.each<[string, string, boolean]>([
    ["delete_*", "delete_page", true],
    ["delete_*", "delete_", true],
    ["delete_*", "undelete_page", false],
    ["delete_*", "Delete_page", false], // names are case-sensitive (MCP "Tool Names")
    ["*", "anything.at-all_v2", true],
    ["*", "", true],
    ["*_admin_*", "db_admin_drop", true],
    ["get_user", "get_user", true],
    ["get_user", "get_users", false],
    ["get_user", "GET_USER", false],
    ["admin.*", "admin.tools.list", true],
  ])("%s matches %j: %s", (match, tool, matched) => {
    const policy = new ToolPolicy([{ match, deny: true }]);
    expect(policy.decide(tool, salesBob).allowed).toBe(!matched);
  });

  it("a deny has no length limit: a long name cannot slip past it", () => {
    const policy = new ToolPolicy([{ match: "delete_*", deny: true }]);
    expect(policy.decide(`delete_${"x".repeat(100_000)}`, salesBob).allowed).toBe(false);
    expect(new ToolPolicy([{ match: "*", deny: true }]).decide("y".repeat(1_000_000), salesBob).allowed).toBe(false);
  });
});

describe("deny", () => {
  const policy = new ToolPolicy([{ match: "admin_*", deny: true }]);

  it("refuses everyone: users, every group, machine clients, any scope", () => {
    for (const who of [platformAlice, salesBob, caller({ subject: "client:ci" }, ["mcp", "docs:write", "admin"])]) {
      expect(policy.decide("admin_reset", who)).toEqual({ allowed: false, reason: "denied", rule: "#1 admin_*" });
      expect(policy.visible("admin_reset", who)).toBe(false);
    }
  });
});

describe("allow", () => {
  const only = (allow: Partial<AccessRules>) => new ToolPolicy([{ match: "deploy", allow: { ...NOBODY, ...allow } }]);
  const may = (policy: ToolPolicy, facts: IdentityFacts) => policy.decide("deploy", caller(facts)).allowed;

  it("by group: members only", () => {
    const policy = only({ groups: ["platform"] });
    expect(may(policy, platformAlice.facts)).toBe(true);
    expect(may(policy, salesBob.facts)).toBe(false);
    expect(may(policy, { subject: "oidc:carol", login: "carol" })).toBe(false);
    // Groups are the IdP's values, compared exactly.
    expect(may(policy, { subject: "oidc:dave", groups: ["Platform"] })).toBe(false);
  });

  it("by login: ASCII letters caseless, a look-alike never", () => {
    const policy = only({ users: ["kevin"] });
    expect(may(policy, { subject: "github:1", login: "Kevin" })).toBe(true);
    expect(may(policy, { subject: "github:2", login: "\u212Aevin" })).toBe(false); // KELVIN SIGN
    expect(may(policy, { subject: "github:3", login: "kevin2" })).toBe(false);
  });

  it("by e-mail domain: verified addresses only, the domain exactly", () => {
    const policy = only({ emailDomains: ["acme.com"] });
    expect(may(policy, { subject: "oidc:a", verifiedEmails: ["a@ACME.com"] })).toBe(true);
    expect(may(policy, { subject: "oidc:b", login: "b@acme.com", verifiedEmails: [] })).toBe(false);
    expect(may(policy, { subject: "oidc:c", verifiedEmails: ["c@acme.com.evil.example"] })).toBe(false);
    expect(may(policy, { subject: "oidc:d", verifiedEmails: ["d@sub.acme.com"] })).toBe(false);
  });

  it("by GitHub organization or team", () => {
    const org = only({ githubOrgs: [{ org: "acme" }] });
    expect(may(org, { subject: "github:1", login: "a", memberships: ["acme"] })).toBe(true);
    expect(may(org, { subject: "github:2", login: "b", memberships: ["acme-evil"] })).toBe(false);
    const team = only({ githubOrgs: [{ org: "acme", team: "platform" }] });
    expect(may(team, { subject: "github:1", login: "a", memberships: ["acme", "acme/platform"] })).toBe(true);
    expect(may(team, { subject: "github:2", login: "b", memberships: ["acme"] })).toBe(false);
  });

  it("by subject or e-mail pattern in users", () => {
    const policy = only({ users: ["github:42", "*@ops.acme.com"] });
    expect(may(policy, { subject: "github:42", login: "x" })).toBe(true);
    expect(may(policy, { subject: "GITHUB:42", login: "y" })).toBe(false);
    expect(may(policy, { subject: "oidc:o", verifiedEmails: ["oncall@ops.acme.com"] })).toBe(true);
    expect(may(policy, { subject: "oidc:p", login: "oncall@ops.acme.com" })).toBe(false); // an unverified login is no e-mail
  });

  it("a machine client only when named by its subject, never by a rule meant for people", () => {
    expect(may(only({ users: ["client:ci"] }), { subject: "client:ci" })).toBe(true);
    expect(may(only({ users: ["client:ci"] }), { subject: "client:cd" })).toBe(false);
    // A bare glob speaks of logins, which a machine client has none of; `client:*` names them all.
    expect(may(only({ users: ["*"] }), { subject: "client:ci" })).toBe(false);
    expect(may(only({ users: ["client:*"] }), { subject: "client:ci" })).toBe(true);
    expect(may(only({ emailDomains: ["acme.com"], groups: ["platform"] }), { subject: "client:ci" })).toBe(false);
  });

  it("an allow that names nobody refuses everyone", () => {
    const policy = only({});
    expect(may(policy, platformAlice.facts)).toBe(false);
    expect(policy.decide("deploy", platformAlice)).toEqual({ allowed: false, reason: "not-allowed", rule: "#1 deploy" });
  });

  it("a caller outside allow never sees the tool; one inside does", () => {
    const policy = only({ groups: ["platform"] });
    expect(policy.visible("deploy", salesBob)).toBe(false);
    expect(policy.visible("deploy", platformAlice)).toBe(true);
  });
});

describe("requireScope", () => {
  const rules: ToolRule[] = [
    { match: "write_*", requireScope: "docs:write" },
    { match: "*", requireScope: "docs:read" },
  ];

  it("needs the scope granted, and names it when it is missing", () => {
    const policy = new ToolPolicy(rules);
    expect(policy.decide("write_page", caller(salesBob.facts, ["mcp", "docs:write"]))).toEqual({ allowed: true });
    expect(policy.decide("write_page", caller(salesBob.facts, ["mcp", "docs:read"]))).toEqual({
      allowed: false,
      reason: "needs-scope",
      scope: "docs:write",
      rule: "#1 write_*",
    });
    expect(policy.decide("read_page", caller(salesBob.facts, ["mcp"]))).toEqual({ allowed: false, reason: "needs-scope", scope: "docs:read", rule: "#2 *" });
  });

  it("counts what a granted scope implies on this server, and only that", () => {
    const implied = new ToolPolicy(rules, { "docs:write": ["docs:read"] });
    expect(implied.decide("read_page", caller(salesBob.facts, ["mcp", "docs:write"]))).toEqual({ allowed: true });
    // Implications run one way: docs:read does not bring docs:write.
    expect(implied.decide("write_page", caller(salesBob.facts, ["mcp", "docs:read"])).allowed).toBe(false);
    // Without the server's implications, docs:write is just docs:write.
    expect(new ToolPolicy(rules).decide("read_page", caller(salesBob.facts, ["mcp", "docs:write"])).allowed).toBe(false);
  });

  it("a tool that only lacks a scope stays visible, so the client can call it and step up", () => {
    const policy = new ToolPolicy(rules);
    expect(policy.visible("write_page", caller(salesBob.facts, ["mcp"]))).toBe(true);
  });

  it("with allow too: a caller outside allow is refused outright, not sent to step up", () => {
    const policy = new ToolPolicy([{ match: "deploy", allow: { ...NOBODY, groups: ["platform"] }, requireScope: "ops" }]);
    expect(policy.decide("deploy", caller(salesBob.facts, ["mcp"]))).toEqual({ allowed: false, reason: "not-allowed", rule: "#1 deploy" });
    expect(policy.decide("deploy", caller(platformAlice.facts, ["mcp"]))).toEqual({ allowed: false, reason: "needs-scope", scope: "ops", rule: "#1 deploy" });
    expect(policy.decide("deploy", caller(platformAlice.facts, ["mcp", "ops"]))).toEqual({ allowed: true });
  });
});

describe("what the gateway needs to know up front", () => {
  it("no rules: nothing to read, nothing hidden, everything allowed", () => {
    const policy = new ToolPolicy([]);
    expect(policy.needsAnalysis).toBe(false);
    expect(policy.hidesTools).toBe(false);
    expect(policy.decide("admin_reset", caller({ subject: "client:x" }, []))).toEqual({ allowed: true });
    expect(policy.visible("admin_reset", caller({ subject: "client:x" }, []))).toBe(true);
  });

  it("scope rules alone are read but hide nothing; deny or allow may hide", () => {
    const scopes = new ToolPolicy([{ match: "*", requireScope: "docs:read" }]);
    expect(scopes.needsAnalysis).toBe(true);
    expect(scopes.hidesTools).toBe(false);
    expect(new ToolPolicy([{ match: "x", deny: true }]).hidesTools).toBe(true);
    expect(new ToolPolicy([{ match: "x", allow: NOBODY }]).hidesTools).toBe(true);
  });
});
