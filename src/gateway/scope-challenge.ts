// The broker's 403 insufficient_scope and 401 challenges on /mcp, for what the tool rules (the
// front end) and the MCP server behind the HTTP proxy refuse: only the broker challenges its
// clients, with the scopes it can grant.
import type { Logger } from "../logger.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { challenge, parseBearerChallenge, type ChallengeOptions } from "./bearer.ts";
import { OAuthError } from "../http/errors.ts";
import { scopeList } from "../grants/scope.ts";

/** How the broker challenges: its metadata URL and required scope, and the scopes it can grant (SCOPES_SUPPORTED with mcp and offline_access). */
export type BrokerChallenge = ChallengeOptions & { readonly knownScopes: readonly string[] };

/**
 * The broker's own answer to the MCP server's 401 or 403, or null to pass the response on (without
 * its WWW-Authenticate, which would send the client to an authorization server the client does not
 * use: the MCP server sits behind the broker and never sees the client's token).
 *
 * - 401: the MCP server refused the caller the broker vouched for (with FORWARD_UPSTREAM_TOKEN, say
 *   an upstream token it no longer accepts): the broker's 401 challenge, invalid_token, so that the
 *   client authorizes again, for the scopes it holds.
 * - 403 with `Bearer error="insufficient_scope", scope="…"` (RFC 6750 §3.1): the MCP 2025-11-25 scope
 *   challenge (https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-challenge-handling).
 *   The broker's 403 names the caller's granted scopes plus the ones asked for: clients of that
 *   revision (the TypeScript SDK 1.x among them) request exactly the challenge's scope, so naming
 *   only the new one would cost them what they hold; clients that add it to what they hold
 *   (SEP-2350, modelcontextprotocol/modelcontextprotocol#2350) get the same set. Scopes the broker
 *   cannot grant are left out; when nothing grantable is missing, a plain 403 without a challenge,
 *   or the client would loop through authorizations that cannot help.
 */
export function backendRefusal(
  status: number,
  header: string | string[] | undefined,
  identity: CallerIdentity,
  options: BrokerChallenge | undefined,
  log: () => Logger,
): OAuthError | null {
  if (!options) return null;
  const granted = scopeList(identity.scopes.join(" "));
  if (status === 401) {
    const description = "The MCP server did not accept this authorization; authorize again.";
    log().info({ clientId: identity.clientId, grantId: identity.grantId }, "MCP server answered 401: the broker's challenge instead");
    return new OAuthError("invalid_token", description, {
      status: 401,
      headers: { "WWW-Authenticate": challenge(options, { code: "invalid_token", description, scope: granted.join(" ") || options.requiredScope }) },
    });
  }
  const params = parseBearerChallenge(header);
  if (params?.error !== "insufficient_scope") return null;
  const asked = scopeList(params.scope);
  const grantable = asked.filter((s) => options.knownScopes.includes(s));
  const missing = grantable.filter((s) => !granted.includes(s));
  // (Named with what is held: scopeRefusal.)
  log().info({ clientId: identity.clientId, grantId: identity.grantId, asked: asked.join(" ").slice(0, 200), missing }, "MCP server asked for more scope");
  if (missing.length === 0) {
    return new OAuthError(
      "insufficient_scope",
      asked.length
        ? `The MCP server requires the scope ${asked.join(" ").slice(0, 200)}, which this authorization server cannot grant.`
        : "The MCP server refused this request for lack of a scope it did not name.",
      { status: 403 },
    );
  }
  return scopeRefusal(granted, missing, options);
}

/**
 * 403 insufficient_scope naming what the caller holds plus what is missing (see backendRefusal):
 * the challenge MCP clients step up on. For the MCP server's own refusals and the tool rules' alike.
 */
export function scopeRefusal(granted: readonly string[], missing: readonly string[], options: ChallengeOptions): OAuthError {
  const description = `This request needs the scope ${missing.join(" ")}.`;
  return new OAuthError("insufficient_scope", description, {
    status: 403,
    headers: {
      "WWW-Authenticate": challenge(options, { code: "insufficient_scope", description, scope: [...new Set([...granted, ...missing])].sort().join(" ") }),
    },
  });
}
