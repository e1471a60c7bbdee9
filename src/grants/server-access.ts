// Who may use one MCP server of the catalogue: the global access policy AND the server's own access
// rules, which narrow it and never widen it. One decision for every place that asks: the sign-in
// for a chosen server, the validation of a token, the upstream re-check of a session's grants.
// Pure: facts in, admit or refuse with the reason out; the matching is the global policy's own
// (grants/policy.ts), applied to the server's rules.
import { serverByResource, type AccessRules, type Catalogue, type McpServerEntry } from "../config/catalogue.ts";
import type { GrantsContext } from "./context.ts";
import { AccessPolicy, type IdentityFacts } from "./policy.ts";

export type ServerAccessDecision =
  | { readonly admitted: true; readonly rule: string }
  | {
      readonly admitted: false;
      /** Which rule refused: the global policy, the server's access rules, or no such server. */
      readonly refusedBy: "policy" | "server" | "unknown_server";
      /** For the person or the client: what refused. */
      readonly reason: string;
    };

/** A server's rules as an AccessPolicy, built once per catalogue entry (a reload makes new entries). */
const serverPolicies = new WeakMap<McpServerEntry, AccessPolicy>();

function serverPolicy(global: AccessPolicy, server: McpServerEntry, rules: AccessRules): AccessPolicy {
  let policy = serverPolicies.get(server);
  if (!policy) {
    const key = `servers.${server.name}.access`;
    policy = new AccessPolicy(
      // Nobody is admitted by default: a server's rules name whom they admit (machine clients too).
      { ...rules, groupsClaim: global.config.groupsClaim, anyUser: false, anyMachine: false },
      { users: `${key}.users`, emailDomains: `${key}.emailDomains`, githubOrgs: `${key}.githubOrgs`, groups: `${key}.groups` },
    );
    serverPolicies.set(server, policy);
  }
  return policy;
}

/**
 * May the person (or machine client) these facts describe use `server`? `server` undefined: the
 * server a grant was for is no longer in the catalogue, and nobody may use it.
 */
export function serverAccess(policy: AccessPolicy, server: McpServerEntry | undefined, facts: IdentityFacts): ServerAccessDecision {
  if (!server) return { admitted: false, refusedBy: "unknown_server", reason: "the MCP server this access was granted for is no longer served here" };
  const global = policy.decide(facts);
  if (!global.admitted) return { admitted: false, refusedBy: "policy", reason: global.reason };
  if (!server.access) return global;
  const own = serverPolicy(policy, server, server.access).decide(facts);
  if (!own.admitted) return { admitted: false, refusedBy: "server", reason: `the access rules of ${server.title} do not admit this account` };
  return { admitted: true, rule: `${global.rule} and ${own.rule}` };
}

/** serverAccess for what a grant was for (its resource), with the policy and catalogue as configured now. */
export function grantAccess(ctx: Pick<GrantsContext, "policy" | "config">, resource: string, facts: IdentityFacts): ServerAccessDecision {
  return serverAccess(ctx.policy, serverByResource(ctx.config.catalogue, resource), facts);
}

/** Every set of rules in the catalogue that narrows access: servers' `access`, tools' `allow`. */
export function narrowingRules(catalogue: Catalogue): AccessRules[] {
  const rules: AccessRules[] = [];
  for (const server of catalogue.servers) {
    if (server.access) rules.push(server.access);
    for (const tool of server.tools) if (!tool.deny && tool.allow) rules.push(tool.allow);
  }
  return rules;
}

/**
 * Whether the identity facts must be read again at every re-check: the global policy reads them,
 * or a server's or a tool's rules do (those are decided per request, from the stored facts).
 */
export function readsFacts(policy: AccessPolicy, catalogue: Catalogue): boolean {
  return policy.readsFacts || narrowingRules(catalogue).length > 0;
}

/**
 * Whether a re-check must also decide each grant of the session against its server: some server
 * narrows the global policy, or the catalogue comes from a file (a reload may remove a server).
 * A catalogue of one from the environment, without rules, adds nothing to the global decision.
 */
export function grantsNeedServerCheck(catalogue: Catalogue): boolean {
  return catalogue.source.kind === "file" || catalogue.servers.some((s) => s.access !== undefined);
}
