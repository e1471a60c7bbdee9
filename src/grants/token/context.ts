// What the token endpoint's handlers (one file per grant type, plus revocation and introspection)
// share: the grants context and the services they call.
import type { GrantsContext, RevocationBus } from "../context.ts";
import type { GrantLifecycle } from "../lifecycle.ts";
import type { UpstreamSessions } from "../upstream-sessions.ts";
import type { AccessValidator } from "../access-validation.ts";
import { CredentialRejected } from "../errors.ts";
import { hashPresentedToken } from "../token-format.ts";
import type { ExchangedTokenResponse, RegisteredClient, TokenResponse } from "../types.ts";
import type { Connections } from "../connections.ts";
import type { SigningKeys } from "../signing-keys.ts";
import type { FormParameters } from "./parameters.ts";
import type { CodeWithGrant, RefreshTokenWithGrant, UpstreamSessionState } from "../../store/hot-store.ts";
import type { ClientRegistry } from "../clients.ts";
import { grantAccess } from "../server-access.ts";

export interface TokenContext extends GrantsContext {
  readonly clients: ClientRegistry;
  readonly lifecycle: GrantLifecycle;
  readonly sessions: UpstreamSessions;
  readonly validator: AccessValidator;
  readonly bus: RevocationBus;
  /** Connected accounts: what a token exchange hands out. */
  readonly connections: Connections;
  /** The broker's keys: a token exchange verifies the assertion it made. */
  readonly signingKeys: SigningKeys;
}

/**
 * The refresh token or code a request presents, read before its client was authenticated (by the
 * hash of the presented value), with that client's row.
 */
export type Preread =
  | { readonly grantType: "refresh_token"; readonly presented: string; readonly hash: string; readonly row: RefreshTokenWithGrant | null }
  | { readonly grantType: "authorization_code"; readonly presented: string; readonly hash: string; readonly row: CodeWithGrant | null };

/**
 * The key `presented` (a refresh token or a code) is stored under: the preread's when it read that
 * very string, so a request hashes its token once (a SHA-256 through OpenSSL's EVP layer is about
 * 7,000 instructions), else hashed here.
 */
export function presentedKey(preread: Preread | null | undefined, grantType: Preread["grantType"], presented: string): string {
  return preread?.grantType === grantType && preread.presented === presented ? preread.hash : hashPresentedToken(presented);
}

/**
 * One grant type: parses its own parameters, checks, issues. The client is already authenticated;
 * a refresh and a code exchange are handed the row read for that (`preread`), the others ignore it.
 */
export type GrantHandler = (client: RegisteredClient, params: FormParameters, preread?: Preread | null) => Promise<TokenResponse | ExchangedTokenResponse>;

/**
 * Re-checks the upstream login behind a grant (honoured by refresh and introspection too), and
 * whether the access rules of the grant's server admit its user, as validation at /mcp decides (a
 * refresh that issued tokens /mcp refuses would send a client round in circles): the rejection,
 * or null when it is alive and admitted or there is no login (machine clients). Throws
 * UpstreamUnavailable when the upstream cannot say.
 */
export async function upstreamRejection(
  t: Pick<TokenContext, "sessions" | "policy" | "config">,
  grant: { upstreamSessionId: string | null; upstreamSession?: UpstreamSessionState | null; resource: string },
): Promise<CredentialRejected | null> {
  if (!grant.upstreamSessionId) return null;
  try {
    const checked = await t.sessions.ensureChecked(grant.upstreamSessionId, grant.upstreamSession ?? undefined);
    const decision = grantAccess(t, grant.resource, checked.facts);
    return decision.admitted ? null : new CredentialRejected(decision.reason);
  } catch (err) {
    if (err instanceof CredentialRejected) return err;
    throw err;
  }
}
