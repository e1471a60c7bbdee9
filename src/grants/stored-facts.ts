// The identity facts kept with an upstream session (the UpstreamSession.facts column), so access
// rules can be decided on every request and not only when the IdP is asked: the verified e-mails,
// the groups and the org/team memberships, as of the sign-in or the last re-check that read them.
// The subject and the login have columns of their own and are not repeated here.
//
// Stored as plain JSON, not encrypted like the upstream tokens: they are personal data of the same
// kind as the login, e-mail and profile columns beside them (also plain), they grant nothing to
// whoever reads them (a token does), and validation reads them on every cache miss, where a
// decryption would cost ~0.2 ms of CPU each. Whoever can read the database reads the e-mail column
// already; encrypting these alone would protect nothing more.
import type { UpstreamIdentity } from "../upstream/provider.ts";
import type { IdentityFacts } from "./policy.ts";

/** What the column holds (each list as the provider gave it). */
interface FactsColumn {
  readonly verifiedEmails: readonly string[];
  /** Absent when the IdP's answer carried no groups claim at all (not the same as none). */
  readonly groups?: readonly string[];
  readonly memberships: readonly string[];
}

/** The column's value for what the IdP said. */
export function factsColumn(identity: Pick<UpstreamIdentity, "verifiedEmails" | "groups" | "memberships">): string {
  const column: FactsColumn = {
    verifiedEmails: identity.verifiedEmails,
    ...(identity.groups ? { groups: identity.groups } : {}),
    memberships: identity.memberships,
  };
  return JSON.stringify(column);
}

/** The facts of an identity the IdP just described, and nothing else of it (no profile, no tokens). */
export function factsOf(identity: Pick<UpstreamIdentity, "subject" | "login" | "verifiedEmails" | "groups" | "memberships">): IdentityFacts {
  return {
    subject: identity.subject,
    login: identity.login,
    verifiedEmails: identity.verifiedEmails,
    groups: identity.groups,
    memberships: identity.memberships,
  };
}

const strings = (value: unknown): string[] | undefined => (Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : undefined);

function parseColumn(column: string | null): Partial<FactsColumn> | null {
  if (column === null) return null;
  try {
    const parsed: unknown = JSON.parse(column);
    if (typeof parsed !== "object" || parsed === null) return null;
    const { verifiedEmails, groups, memberships } = parsed as Record<string, unknown>;
    return { verifiedEmails: strings(verifiedEmails), groups: strings(groups), memberships: strings(memberships) };
  } catch {
    return null;
  }
}

/**
 * The facts of a stored upstream session. A session stored before the broker kept them (null), or
 * a value it cannot read, gives only the subject and the login: the lists stay unknown (undefined),
 * so a rule that needs them admits nobody until a re-check has read them again.
 */
export function storedFacts(row: { readonly subject: string; readonly login: string | null; readonly facts: string | null }): IdentityFacts {
  const column = parseColumn(row.facts);
  return {
    subject: row.subject,
    login: row.login ?? undefined,
    verifiedEmails: column?.verifiedEmails,
    groups: column?.groups,
    memberships: column?.memberships,
  };
}

/** Whether the session's facts were never stored (a session from before they were kept). */
export function factsUnknown(row: { readonly facts: string | null }): boolean {
  return parseColumn(row.facts) === null;
}

/**
 * The groups last stored for a session, for a re-check whose answer carries no groups claim (some
 * IdPs put groups only in the ID token of the sign-in): the facts column, or, for a session stored
 * before it existed, the profile that kept them then.
 */
export function storedGroups(row: { readonly facts: string | null; readonly profile: string }): readonly string[] | undefined {
  const fromFacts = parseColumn(row.facts)?.groups;
  if (fromFacts) return fromFacts;
  try {
    return strings((JSON.parse(row.profile) as { groups?: unknown }).groups);
  } catch {
    return undefined;
  }
}
