// What the token endpoint's handlers (one file per grant type, plus revocation and introspection)
// share: the grants context and the services they call.
import type { GrantsContext, RevocationBus } from "../context.ts";
import type { GrantLifecycle } from "../lifecycle.ts";
import type { UpstreamSessions } from "../upstream-sessions.ts";
import type { AccessValidator } from "../access-validation.ts";
import { CredentialRejected } from "../errors.ts";
import type { RegisteredClient, TokenResponse } from "../types.ts";
import type { FormParameters } from "./parameters.ts";
import type { UpstreamSession } from "../../store/hot-store.ts";

export interface TokenContext extends GrantsContext {
  readonly lifecycle: GrantLifecycle;
  readonly sessions: UpstreamSessions;
  readonly validator: AccessValidator;
  readonly bus: RevocationBus;
}

/** One grant type: parses its own parameters, checks, issues. The client is already authenticated. */
export type GrantHandler = (client: RegisteredClient, params: FormParameters) => Promise<TokenResponse>;

/**
 * Re-checks the upstream login behind a grant (honoured by refresh and introspection too): the
 * rejection when it is dead, null when it is alive or there is none (machine clients). Throws
 * UpstreamUnavailable when the upstream cannot say.
 */
export async function upstreamRejection(
  sessions: UpstreamSessions,
  grant: { upstreamSessionId: string | null; upstreamSession?: UpstreamSession | null },
): Promise<CredentialRejected | null> {
  if (!grant.upstreamSessionId) return null;
  try {
    await sessions.ensureChecked(grant.upstreamSessionId, grant.upstreamSession ?? undefined);
    return null;
  } catch (err) {
    if (err instanceof CredentialRejected) return err;
    throw err;
  }
}
