// Permissions per tool: a server's tool rules (config/catalogue.ts ToolRule) compiled once, then
// asked for every tools/call the caller sends and every tool of the tools/list answers it gets.
// Pure: the caller's identity facts and the token's scopes in, a decision out; the gateway turns
// it into a JSON-RPC error, a 403 insufficient_scope challenge or a shorter tool list.
//
// The rules are tried in order and the first whose glob names the tool decides; when none does,
// the tool may be called (the server's access rules already admitted the caller). Who a rule's
// `allow` admits is decided by the access policy itself (grants/policy.ts), with the same
// comparisons as sign-in: ASCII-caseless logins, verified e-mails only, exact subjects.
//
// Tool names are compared exactly, case included: MCP says servers SHOULD treat them as
// case-sensitive (2025-11-25 server/tools "Tool Names"), so `Delete_repo` and `delete_repo` may be
// two tools. A server that dispatches names caselessly needs rules written for every spelling.
import type { AccessRules, ToolRule } from "../config/catalogue.ts";
import { globMatcher } from "./glob.ts";
import { AccessPolicy, type IdentityFacts } from "./policy.ts";
import { covers, type ScopeImplications } from "./scope.ts";

/** Who asks: what the access policy looks at, and what the access token grants. */
export interface ToolCaller {
  readonly facts: IdentityFacts;
  /** The token's scopes as granted (their implications are added here). */
  readonly scopes: readonly string[];
}

/**
 * `denied`: a `deny` rule names the tool; `not-allowed`: a rule names it and its `allow` does not
 * admit the caller; `needs-scope`: the token lacks the scope a rule requires, which a step-up can
 * bring. `rule` names the deciding rule for logs and audit events, never for the caller.
 */
export type ToolDecision =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly reason: "denied" | "not-allowed"; readonly rule: string }
  | { readonly allowed: false; readonly reason: "needs-scope"; readonly scope: string; readonly rule: string };

interface CompiledRule {
  /** `#2 delete_*`: its place in the server's list and its glob, as the operator wrote them. */
  readonly label: string;
  readonly matches: (tool: string) => boolean;
  readonly deny: boolean;
  readonly allow: AccessPolicy | undefined;
  readonly requireScope: string | undefined;
}

const ALLOWED: ToolDecision = { allowed: true };

/**
 * No length limit: a rule that stopped matching beyond some length would let a long name past a
 * `deny` (the glob stays linear in the name's length, grants/glob.ts).
 */
const TOOL_NAME_GLOB = { caseless: false, maxLength: Number.POSITIVE_INFINITY } as const;

/** An `allow` list as an access policy that admits only whom it names (no "anyone" switches). */
function allowPolicy(rules: AccessRules): AccessPolicy {
  return new AccessPolicy({
    users: rules.users,
    emailDomains: rules.emailDomains,
    githubOrgs: rules.githubOrgs,
    groups: rules.groups,
    // Only describe() reads it; the groups were read at sign-in with the server's claim.
    groupsClaim: "groups",
    anyUser: false,
    anyMachine: false,
  });
}

export class ToolPolicy {
  private readonly rules: readonly CompiledRule[];

  /** `implies`: the server's scope implications (a granted scope that satisfies others). */
  constructor(
    rules: readonly ToolRule[],
    private readonly implies: ScopeImplications = {},
  ) {
    this.rules = rules.map((rule, index) => {
      const common = { label: `#${index + 1} ${rule.match}`, matches: globMatcher(rule.match, TOOL_NAME_GLOB) };
      if (rule.deny === true) return { ...common, deny: true, allow: undefined, requireScope: undefined };
      return { ...common, deny: false, allow: rule.allow && allowPolicy(rule.allow), requireScope: rule.requireScope };
    });
  }

  /**
   * Whether requests need reading at all: false without rules, so the gateway streams bodies on
   * without parsing them, as it does for a server without tool rules.
   */
  get needsAnalysis(): boolean {
    return this.rules.length > 0;
  }

  /** Whether some caller may be refused a tool outright, so tools/list answers need filtering. */
  get hidesTools(): boolean {
    return this.rules.some((rule) => rule.deny || rule.allow !== undefined);
  }

  decide(tool: string, caller: ToolCaller): ToolDecision {
    const rule = this.rules.find((r) => r.matches(tool));
    if (rule === undefined) return ALLOWED;
    if (rule.deny) return { allowed: false, reason: "denied", rule: rule.label };
    if (rule.allow && !rule.allow.decide(caller.facts).admitted) return { allowed: false, reason: "not-allowed", rule: rule.label };
    if (rule.requireScope !== undefined && !covers(caller.scopes, [rule.requireScope], this.implies)) {
      return { allowed: false, reason: "needs-scope", scope: rule.requireScope, rule: rule.label };
    }
    return ALLOWED;
  }

  /**
   * Whether tools/list shows the tool to this caller: hidden when it is denied or not allowed.
   * A tool that only lacks a scope stays visible: MCP clients step up when a call is refused with
   * 403 insufficient_scope (2025-11-25 authorization, "Scope Challenge Handling"), and a client
   * cannot call, and so never step up for, a tool it was never shown: hiding it would make the
   * scope unreachable, while showing it costs one refused call that says which scope to ask for.
   */
  visible(tool: string, caller: ToolCaller): boolean {
    const decision = this.decide(tool, caller);
    return decision.allowed || decision.reason === "needs-scope";
  }
}
