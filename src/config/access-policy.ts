// Who may sign in, as the operator wrote it in the environment (ALLOWED_*, ALLOW_ANY_USER): parsed
// once at start, with one line per mistake. grants/policy.ts applies it.
import { ConfigError, commaList, type Env, type UpstreamKind } from "./values.ts";

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

export function parseAccessPolicy(env: Env, provider: UpstreamKind, allowAnyUser: boolean): AccessPolicyConfig {
  const users = commaList(env.ALLOWED_USERS);
  for (const entry of users) {
    if (/\s/.test(entry)) throw new ConfigError("ALLOWED_USERS", `expected comma-separated entries without spaces, got ${JSON.stringify(entry)}`);
    if (/^\*+$/.test(entry)) throw new ConfigError("ALLOWED_USERS", 'a lone "*" would admit everyone: set ALLOW_ANY_USER=true if that is what you mean');
  }
  // Checked before lower-casing: toLowerCase() would turn a look-alike such as "\u212Aaka.com"
  // (KELVIN SIGN) into kaka.com. ASCII only, so the policy compares them in ASCII (grants/glob.ts);
  // an internationalized domain is written in its xn-- form.
  const emailDomains = commaList(env.ALLOWED_EMAIL_DOMAINS).map((d) => {
    const domain = d.replace(/^@/, "");
    if (!/^[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$/.test(domain))
      throw new ConfigError(
        "ALLOWED_EMAIL_DOMAINS",
        `expected domain names such as acme.com (xn-- form for international ones), got ${JSON.stringify(domain)}`,
      );
    return domain.toLowerCase();
  });
  const githubOrgs = commaList(env.ALLOWED_GITHUB_ORGS).map((entry) => {
    const [org, team, ...rest] = entry.split("/");
    if (!org || !SLUG.test(org) || (team !== undefined && !SLUG.test(team)) || rest.length)
      throw new ConfigError(
        "ALLOWED_GITHUB_ORGS",
        `expected entries like acme or acme/platform (organization or organization/team), got ${JSON.stringify(entry)}`,
      );
    return { org, team };
  });
  if (githubOrgs.length && provider !== "github")
    throw new ConfigError(
      "ALLOWED_GITHUB_ORGS",
      `organizations can only be checked with UPSTREAM_PROVIDER=github (it is ${provider}); use ALLOWED_GROUPS for OIDC groups`,
    );
  const groups = commaList(env.ALLOWED_GROUPS);
  if (groups.length && provider === "github")
    throw new ConfigError("ALLOWED_GROUPS", "GitHub sends no group claim: use ALLOWED_GITHUB_ORGS=org or org/team instead");
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
