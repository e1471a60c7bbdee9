// Who may sign in, as the operator wrote it in the environment (ALLOWED_*, ALLOW_ANY_USER): parsed
// once at start, with one line per mistake. grants/policy.ts applies it. The rules each list obeys
// (parseAccessRules) hold for the configuration file's per-server lists too.
import { ConfigError, commaList, type Env, type UpstreamKind } from "./values.ts";
import type { AccessRules } from "./catalogue.ts";

export interface GitHubOrgRule {
  readonly org: string;
  /** A team slug inside the org; undefined: any member of the org. */
  readonly team?: string | undefined;
}

export interface AccessPolicyConfig {
  /** ALLOWED_USERS entries as written (globs with `*`). */
  readonly users: readonly string[];
  /** ALLOWED_EMAIL_DOMAINS, lower-case, without a leading `@`. */
  readonly emailDomains: readonly string[];
  readonly githubOrgs: readonly GitHubOrgRule[];
  readonly groups: readonly string[];
  /** UPSTREAM_GROUPS_CLAIM: the OIDC claim that carries the groups. */
  readonly groupsClaim: string;
  /** ALLOW_ANY_USER=true, or demo mode without any rule: every person the IdP signs in. */
  readonly anyUser: boolean;
  /**
   * Demo mode without any rule: every machine client too. ALLOW_ANY_USER alone never admits one
   * (it speaks of people); ALLOWED_USERS must name it (`client:<id>`, `client:*`).
   */
  readonly anyMachine: boolean;
}

// GitHub org and team slugs: letters, digits, `-`, `_`, `.`.
const SLUG = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** The variables that name who may sign in; the start-up refusal lists them. */
export const POLICY_VARIABLES = ["ALLOWED_USERS", "ALLOWED_EMAIL_DOMAINS", "ALLOWED_GITHUB_ORGS", "ALLOWED_GROUPS", "ALLOW_ANY_USER"] as const;

/** The kinds of rule, as a server's `access` and a tool's `allow` name them in the configuration file. */
export type AccessRuleKind = keyof AccessRules;

/** The rules as written: one list of entries per kind. */
export type AccessRuleLists = { readonly [K in AccessRuleKind]: readonly string[] };

/** How messages name each list, and what to write instead of a lone `*`: the variables, or the file's keys. */
export interface AccessRuleWording {
  readonly names: { readonly [K in AccessRuleKind]: string };
  readonly everyone: string;
}

/** The environment's names for the global policy. */
const ENVIRONMENT_WORDING: AccessRuleWording = {
  names: { users: "ALLOWED_USERS", emailDomains: "ALLOWED_EMAIL_DOMAINS", githubOrgs: "ALLOWED_GITHUB_ORGS", groups: "ALLOWED_GROUPS" },
  everyone: "set ALLOW_ANY_USER=true if that is what you mean",
};

/** A mistake in one list; `index` is the entry's place in it, undefined when the list as a whole is wrong. */
export type AccessRuleReport = (kind: AccessRuleKind, index: number | undefined, message: string) => void;

/**
 * The rules every access list obeys, wherever it is written (the global policy's variables, a
 * server's `access`, a tool's `allow`): each mistake is reported, and the rules that hold returned.
 */
export function parseAccessRules(lists: AccessRuleLists, provider: UpstreamKind, wording: AccessRuleWording, report: AccessRuleReport): AccessRules {
  const users = lists.users.filter((entry, i) => {
    if (/\s/.test(entry)) report("users", i, `expected entries without spaces, got ${JSON.stringify(entry)}`);
    else if (/^\*+$/.test(entry)) report("users", i, `a lone "*" would admit everyone: ${wording.everyone}`);
    else return true;
    return false;
  });
  // Checked before lower-casing: toLowerCase() would turn a look-alike such as "\u212Aaka.com"
  // (KELVIN SIGN) into kaka.com. ASCII only, so the policy compares them in ASCII (grants/glob.ts);
  // an internationalized domain is written in its xn-- form.
  const emailDomains = lists.emailDomains.flatMap((d, i) => {
    const domain = d.replace(/^@/, "");
    if (/^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$/.test(domain)) return [domain.toLowerCase()];
    report("emailDomains", i, `expected domain names such as acme.com (xn-- form for international ones), got ${JSON.stringify(domain)}`);
    return [];
  });
  const githubOrgs = lists.githubOrgs.flatMap((entry, i) => {
    const [org, team, ...rest] = entry.split("/");
    if (org && SLUG.test(org) && (team === undefined || SLUG.test(team)) && !rest.length) return [{ org, team }];
    report("githubOrgs", i, `expected entries like acme or acme/platform (organization or organization/team), got ${JSON.stringify(entry)}`);
    return [];
  });
  if (githubOrgs.length && provider !== "github")
    report(
      "githubOrgs",
      undefined,
      `organizations can only be checked with UPSTREAM_PROVIDER=github (it is ${provider}); use ${wording.names.groups} for OIDC groups`,
    );
  const groups = [...lists.groups];
  if (groups.length && provider === "github")
    report("groups", undefined, `GitHub sends no group claim: use ${wording.names.githubOrgs} (org or org/team) instead`);
  return { users, emailDomains, githubOrgs, groups };
}

export function parseAccessPolicy(env: Env, provider: UpstreamKind, allowAnyUser: boolean): AccessPolicyConfig {
  const { names } = ENVIRONMENT_WORDING;
  const lists: AccessRuleLists = {
    users: commaList(env.ALLOWED_USERS),
    emailDomains: commaList(env.ALLOWED_EMAIL_DOMAINS),
    githubOrgs: commaList(env.ALLOWED_GITHUB_ORGS),
    groups: commaList(env.ALLOWED_GROUPS),
  };
  const { users, emailDomains, githubOrgs, groups } = parseAccessRules(lists, provider, ENVIRONMENT_WORDING, (kind, _index, message) => {
    throw new ConfigError(names[kind], message);
  });
  const groupsClaim = env.UPSTREAM_GROUPS_CLAIM?.trim() || "groups";
  const anyRule = users.length + emailDomains.length + githubOrgs.length + groups.length > 0;
  if (!anyRule && !allowAnyUser && provider !== "demo") {
    const who = provider === "github" ? "GitHub account" : "account at the identity provider";
    throw new ConfigError(
      "ALLOWED_USERS",
      `nobody is allowed to sign in yet: set ALLOWED_USERS (logins, subjects or e-mails, e.g. octocat,*@acme.com), ALLOWED_EMAIL_DOMAINS (e.g. acme.com), ${
        provider === "github" ? "ALLOWED_GITHUB_ORGS (e.g. acme or acme/platform)" : "ALLOWED_GROUPS (with UPSTREAM_GROUPS_CLAIM)"
      }, or ALLOW_ANY_USER=true to admit anyone with a ${who}`,
    );
  }
  // Demo mode stays open unless the operator wrote a rule (anyone can be anyone there anyway).
  const openDemo = provider === "demo" && !anyRule;
  return { users, emailDomains, githubOrgs, groups, groupsClaim, anyUser: allowAnyUser || openDemo, anyMachine: openDemo };
}
