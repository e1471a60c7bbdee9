// Who may sign in: identity facts in, admit or refuse (with the rule or the reason) out. Pure: the
// facts are read by the upstream provider at login and at every re-check; this only decides.
import type { AccessPolicyConfig } from "../config/access-policy.ts";
import { equalsAsciiCaseless, foldAsciiCase, globMatcher, MAX_COMPARED_LENGTH } from "./glob.ts";
import { isMachineSubject } from "./types.ts";

/** What the policy looks at; a subset of UpstreamIdentity, or a machine client's subject. */
export interface IdentityFacts {
  readonly subject: string;
  readonly login?: string | undefined;
  readonly verifiedEmails?: readonly string[] | undefined;
  readonly groups?: readonly string[] | undefined;
  readonly memberships?: readonly string[] | undefined;
}

export type PolicyDecision = { readonly admitted: true; readonly rule: string } | { readonly admitted: false; readonly reason: string };

/** One ALLOWED_USERS entry: an e-mail pattern, a subject pattern (`github:1`), or a login pattern. */
function userEntryMatcher(entry: string): (facts: IdentityFacts) => boolean {
  if (entry.includes("@")) {
    // Verified addresses only: an OIDC login may be an unverified e-mail, so never the login.
    const matches = globMatcher(entry, { caseless: true, maxLength: MAX_COMPARED_LENGTH.email });
    return (facts) => (facts.verifiedEmails ?? []).some(matches);
  }
  if (/^[a-z]+:/i.test(entry)) {
    // Subjects are the IdP's identifiers: compared exactly, case included.
    const matches = globMatcher(entry, { caseless: false, maxLength: MAX_COMPARED_LENGTH.subject });
    return (facts) => matches(facts.subject);
  }
  const matches = globMatcher(entry, { caseless: true, maxLength: MAX_COMPARED_LENGTH.login });
  return (facts) => facts.login !== undefined && matches(facts.login);
}

/** How a decision names the kind of rule that admitted: where the operator wrote it. */
export interface RuleNames {
  readonly users: string;
  readonly emailDomains: string;
  readonly githubOrgs: string;
  readonly groups: string;
}

/** The global policy's rules, written in the environment. */
const ENVIRONMENT_RULES: RuleNames = {
  users: "ALLOWED_USERS",
  emailDomains: "ALLOWED_EMAIL_DOMAINS",
  githubOrgs: "ALLOWED_GITHUB_ORGS",
  groups: "ALLOWED_GROUPS",
};

export class AccessPolicy {
  private readonly userRules: readonly { readonly entry: string; readonly matches: (facts: IdentityFacts) => boolean }[];

  /** `names`: how decisions name the rules (default: the environment variables of the global policy). */
  constructor(
    readonly config: AccessPolicyConfig,
    private readonly names: RuleNames = ENVIRONMENT_RULES,
  ) {
    this.userRules = config.users.map((entry) => ({ entry, matches: userEntryMatcher(entry) }));
  }

  /** True when sign-ins need the facts beyond the subject that only the IdP can tell again. */
  get readsFacts(): boolean {
    return !this.config.anyUser;
  }

  decide(facts: IdentityFacts): PolicyDecision {
    const { config } = this;
    // ALLOW_ANY_USER speaks of people with an account at the IdP: a machine client (no person
    // behind it) is admitted only by name in ALLOWED_USERS, except in an open demo.
    if (isMachineSubject(facts.subject)) {
      if (config.anyMachine) return { admitted: true, rule: "demo mode without access rules" };
    } else if (config.anyUser) return { admitted: true, rule: "ALLOW_ANY_USER" };
    for (const rule of this.userRules) if (rule.matches(facts)) return { admitted: true, rule: `${this.names.users} ${rule.entry}` };
    for (const email of facts.verifiedEmails ?? []) {
      if (email.length > MAX_COMPARED_LENGTH.email) continue;
      const domain = foldAsciiCase(email.slice(email.lastIndexOf("@") + 1));
      if (config.emailDomains.includes(domain)) return { admitted: true, rule: `${this.names.emailDomains} ${domain}` };
    }
    for (const membership of facts.memberships ?? []) {
      const wanted = config.githubOrgs.find((o) => equalsAsciiCaseless(o.team ? `${o.org}/${o.team}` : o.org, membership));
      if (wanted) return { admitted: true, rule: `${this.names.githubOrgs} ${membership}` };
    }
    for (const group of facts.groups ?? []) if (config.groups.includes(group)) return { admitted: true, rule: `${this.names.groups} ${group}` };
    return { admitted: false, reason: "no access rule admits this account" };
  }

  /** One line per rule, for `check` and the start-up log. */
  describe(): string[] {
    const { config } = this;
    if (config.anyUser) {
      const machines = config.users.filter((entry) => isMachineSubject(entry));
      const lines = ["anyone who can sign in at the identity provider (ALLOW_ANY_USER)"];
      // (Demo mode without rules admits machine clients too: "anyone" says it there.)
      if (machines.length && !config.anyMachine) lines.push(`machine clients: ${machines.join(", ")}`);
      return lines;
    }
    const lines: string[] = [];
    if (config.users.length) lines.push(`users: ${config.users.join(", ")}`);
    if (config.emailDomains.length) lines.push(`verified e-mail domains: ${config.emailDomains.join(", ")}`);
    if (config.githubOrgs.length) lines.push(`GitHub organizations/teams: ${config.githubOrgs.map((o) => (o.team ? `${o.org}/${o.team}` : o.org)).join(", ")}`);
    if (config.groups.length) lines.push(`groups (claim ${config.groupsClaim}): ${config.groups.join(", ")}`);
    return lines;
  }
}
