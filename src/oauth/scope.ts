// Scopes: space-separated, each from the supported set.
import { OAuthError } from "../http/errors.ts";
import { DEFAULT_SCOPE, SUPPORTED_SCOPES } from "../grants/types.ts";

/** Normalized scope (sorted, deduplicated); the default when none was asked; invalid_scope otherwise. */
export function resolveScope(value: string | undefined, fallback: string = DEFAULT_SCOPE): string {
  if (value === undefined || value.trim() === "") return fallback;
  if (!/^[\x21\x23-\x5B\x5D-\x7E]+( [\x21\x23-\x5B\x5D-\x7E]+)*$/.test(value.trim())) {
    throw new OAuthError("invalid_scope", "scope must be space-separated scope tokens.");
  }
  const requested = [...new Set(value.trim().split(" "))];
  const unknown = requested.filter((s) => !(SUPPORTED_SCOPES as readonly string[]).includes(s));
  if (unknown.length) throw new OAuthError("invalid_scope", `Unsupported scope: ${unknown.join(" ")}. Supported: ${SUPPORTED_SCOPES.join(" ")}.`);
  // Access to the MCP endpoint is what every grant is for.
  if (!requested.includes(DEFAULT_SCOPE)) requested.push(DEFAULT_SCOPE);
  return requested.sort().join(" ");
}
