// Scopes: space-separated tokens (RFC 6749 §3.3), each one this broker knows. The operator names
// them (SCOPES_SUPPORTED, default `mcp`); `mcp` (access to the MCP endpoint at all) and
// `offline_access` (refresh tokens) are always understood.
import { InvalidScope } from "./errors.ts";
import { DEFAULT_SCOPE, OFFLINE_ACCESS } from "./types.ts";
import type { ScopeImplications } from "../config/client-interop.ts";

const SCOPE_SYNTAX = /^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/;

/** What the broker knew before SCOPES_SUPPORTED existed: the default when no set is given. */
const BUILT_IN = [DEFAULT_SCOPE, OFFLINE_ACCESS] as const;

/** Every scope a client may ask for: the configured ones, plus `mcp` and `offline_access`. */
export function knownScopes(supported: readonly string[] = []): string[] {
  return [...new Set([DEFAULT_SCOPE, ...supported, OFFLINE_ACCESS])];
}

/** The scopes of the protected resource (RFC 9728 scopes_supported): the known ones but offline_access. */
export function resourceScopes(supported: readonly string[] = []): string[] {
  return knownScopes(supported).filter((s) => s !== OFFLINE_ACCESS);
}

export type { ScopeImplications };

/** The scopes and every scope they imply, sorted and deduplicated. */
export function withImplied(scopes: readonly string[], implies: ScopeImplications = {}): string[] {
  return [...new Set(scopes.flatMap((s) => [s, ...(implies[s] ?? [])]))].sort();
}

/**
 * Whether `granted` is enough for `required`: each required scope is granted, or implied by one
 * that is (MCP: servers "MUST account for scope hierarchies" when deciding whether a token is
 * sufficient).
 */
export function covers(granted: readonly string[], required: readonly string[], implies: ScopeImplications = {}): boolean {
  const held = new Set(withImplied(granted, implies));
  return required.every((s) => held.has(s));
}

/** A space-separated scope value as a sorted, deduplicated list (no validation). */
export function scopeList(value: string | null | undefined): string[] {
  return [...new Set((value ?? "").split(" ").filter(Boolean))].sort();
}

/**
 * The requested scopes, deduplicated and sorted, or undefined when none were asked. Throws
 * invalid_scope for bad syntax, scopes the broker does not know (`supported`: SCOPES_SUPPORTED;
 * without it, `mcp` and `offline_access`), or, when `registered` is given, scopes outside the
 * client's registration.
 */
export function parseScope(value: string | undefined, registered?: string | null, supported?: readonly string[]): string[] | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (trimmed.length > 1000 || !SCOPE_SYNTAX.test(trimmed)) throw new InvalidScope("scope must be space-separated scope tokens.");
  const requested = [...new Set(trimmed.split(" "))].sort();
  const known: readonly string[] = supported ? knownScopes(supported) : BUILT_IN;
  const unknown = requested.filter((s) => !known.includes(s));
  if (unknown.length) throw new InvalidScope(`Unsupported scope: ${unknown.join(" ").slice(0, 200)}. Supported: ${known.join(" ")}.`);
  if (registered) {
    const allowed = new Set([...registered.split(" "), DEFAULT_SCOPE]);
    const outside = requested.filter((s) => !allowed.has(s));
    if (outside.length) throw new InvalidScope(`This client did not register the scope ${outside.join(" ")}.`);
  }
  return requested;
}

/**
 * The scope a new grant gets without a person's consent (client_credentials): what was asked,
 * within the client's registration (else what it registered, else the default), always including
 * the default scope, since access to the MCP endpoint is what every grant is for.
 */
export function resolveScope(value: string | undefined, registered?: string | null, supported?: readonly string[], implies?: ScopeImplications): string {
  const scopes = parseScope(value, registered, supported) ?? parseScope(registered ?? undefined, undefined, supported) ?? [];
  return withImplied([...scopes, DEFAULT_SCOPE], implies).join(" ");
}

/**
 * The scope of an authorization request, which the user consents to: any scope the broker knows,
 * whether or not the client registered it. The registration's scope is the default when the request
 * names none (its unknown scopes dropped), and `mcp` is always included.
 *
 * Not limited to the registration: step-up authorization (MCP 2025-11-25, "Scope Challenge
 * Handling") asks an already registered client to re-authorize for a scope the server named only
 * now, and the SDKs do not register again for it. The MCP TypeScript SDK dropped the same check
 * from its authorization server (modelcontextprotocol/typescript-sdk#983; python-sdk#2301 cites it).
 */
export function authorizationScope(value: string | undefined, registered?: string | null, supported?: readonly string[], implies?: ScopeImplications): string {
  const known: readonly string[] = supported ? knownScopes(supported) : BUILT_IN;
  const scopes = parseScope(value, undefined, supported) ?? scopeList(registered).filter((s) => known.includes(s));
  // What the asked scopes imply is granted with them (SCOPE_IMPLIES): the consent page lists it,
  // and the MCP server sees it in X-Auth-Scopes without knowing the operator's hierarchy.
  return withImplied([...scopes, DEFAULT_SCOPE], implies).join(" ");
}
