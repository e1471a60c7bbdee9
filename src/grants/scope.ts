// Scopes: space-separated tokens (RFC 6749 §3.3), each from the supported set and, when the client
// registered a scope, from that set too.
import { InvalidScope } from "./errors.ts";
import { DEFAULT_SCOPE, SUPPORTED_SCOPES } from "./types.ts";

const SCOPE_SYNTAX = /^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/;

/**
 * The requested scopes, deduplicated and sorted, or undefined when none were asked. Throws
 * invalid_scope for bad syntax, unsupported scopes, or scopes outside the client's registration.
 */
export function parseScope(value: string | undefined, registered?: string | null): string[] | undefined {
  if (value === undefined || value.trim() === "") return undefined;
  const trimmed = value.trim();
  if (trimmed.length > 1000 || !SCOPE_SYNTAX.test(trimmed)) throw new InvalidScope("scope must be space-separated scope tokens.");
  const requested = [...new Set(trimmed.split(" "))].sort();
  const unknown = requested.filter((s) => !(SUPPORTED_SCOPES as readonly string[]).includes(s));
  if (unknown.length) throw new InvalidScope(`Unsupported scope: ${unknown.join(" ").slice(0, 200)}. Supported: ${SUPPORTED_SCOPES.join(" ")}.`);
  if (registered) {
    const allowed = new Set([...registered.split(" "), DEFAULT_SCOPE]);
    const outside = requested.filter((s) => !allowed.has(s));
    if (outside.length) throw new InvalidScope(`This client did not register the scope ${outside.join(" ")}.`);
  }
  return requested;
}

/**
 * The scope a new grant gets: what was asked (else what the client registered, else the default),
 * always including the default scope, since access to the MCP endpoint is what every grant is for.
 */
export function resolveScope(value: string | undefined, registered?: string | null): string {
  const scopes = parseScope(value, registered) ?? parseScope(registered ?? undefined) ?? [];
  return [...new Set([...scopes, DEFAULT_SCOPE])].sort().join(" ");
}
