// What every upstream callback does, whoever started the sign-in (a client's authorization or the
// connected-apps page): exchange the code, read who signed in with the facts the access policy
// needs, and apply the policy. A refused account gets nothing: its upstream token is revoked and
// the refusal is audited and logged (never with a token).
import { callbackUrl } from "../config/load.ts";
import type { GrantsContext } from "./context.ts";
import { audit } from "./audit.ts";
import { grantAccess } from "./server-access.ts";
import { factsOf } from "./stored-facts.ts";
import { UpstreamError, type UpstreamIdentity, type UpstreamTokens } from "../upstream/provider.ts";

/** What a browser brings back to one of the broker's callbacks from the upstream IdP (an MCP client's sign-in, or the account page's). */
export interface BrowserCallback {
  readonly callbackUrl: URL;
  /** The browser session presenting the callback; null when the browser has none. */
  readonly browserSessionId: string | null;
  readonly ip?: string | undefined;
}

/** What a pending sign-in stored when it sent the browser upstream. */
export interface StartedUpstreamLogin {
  readonly upstreamNonce: string | null;
  /** The upstream PKCE verifier, encrypted. */
  readonly upstreamVerifierEnc: string | null;
}

/** The account that signed in, and why it may not use this service. */
export interface RefusedAccount {
  readonly subject: string;
  readonly login: string;
  readonly providerName: string;
  readonly reason: string;
}

export type UpstreamAuthentication =
  | { readonly outcome: "admitted"; readonly tokens: UpstreamTokens; readonly identity: UpstreamIdentity; readonly rule: string }
  | { readonly outcome: "refused"; readonly account: RefusedAccount }
  /** The IdP refused, failed or could not be reached; `message` is for logs, never for the user. */
  | { readonly outcome: "failed"; readonly kind: UpstreamError["kind"]; readonly message: string };

/** An upstream login the access policy admitted: its tokens, the identity, and the rule that admitted it. */
export type AdmittedSignIn = Extract<UpstreamAuthentication, { readonly outcome: "admitted" }>;

type Audited = { readonly clientId?: string | undefined; readonly ip?: string | undefined; readonly resource?: string | undefined };

/** The code exchanged and the identity read; a failure logged (a configuration problem louder) and returned. */
async function exchange(
  ctx: GrantsContext,
  callback: { readonly callbackUrl: URL; readonly state: string; readonly started: StartedUpstreamLogin },
): Promise<{ readonly tokens: UpstreamTokens; readonly identity: UpstreamIdentity } | Extract<UpstreamAuthentication, { readonly outcome: "failed" }>> {
  try {
    const codeVerifier = await ctx.secrets.decrypt(callback.started.upstreamVerifierEnc ?? "");
    const tokens = await ctx.provider.exchangeCode(
      {
        callbackUrl: callback.callbackUrl,
        expectedState: callback.state,
        expectedNonce: callback.started.upstreamNonce ?? undefined,
        codeVerifier,
      },
      callbackUrl(ctx.config.publicUrl),
    );
    return { tokens, identity: await ctx.provider.fetchIdentity(tokens) };
  } catch (err) {
    const kind = err instanceof UpstreamError ? err.kind : "unavailable";
    const message = err instanceof Error ? err.message : String(err);
    if (kind === "misconfigured") ctx.logger.error({ err: message }, "upstream login failed: configuration problem");
    else ctx.logger.warn({ err: message, kind }, "upstream login failed");
    return { outcome: "failed", kind, message };
  }
}

/** A refused account: its upstream token given back, the refusal logged and audited. */
async function refuse(ctx: GrantsContext, tokens: UpstreamTokens, identity: UpstreamIdentity, audited: Audited, refusedByServer: boolean): Promise<void> {
  // Nothing may stand on the refused account's upstream token: give it back now. Best effort (the
  // IdP may be down); it is never stored either way.
  await ctx.provider.revoke(tokens).catch((err: unknown) => {
    ctx.logger.warn(
      { err: err instanceof Error ? err.message : String(err), subject: identity.subject },
      "could not revoke a refused account's upstream token",
    );
  });
  ctx.logger.warn({ subject: identity.subject, login: identity.login, clientId: audited.clientId, ip: audited.ip }, "sign-in refused by the access policy");
  await audit(ctx.db, {
    type: "login.refused",
    clientId: audited.clientId,
    subject: identity.subject,
    ip: audited.ip,
    detail: {
      reason: refusedByServer ? "server_access_denied" : "policy_denied",
      login: identity.login,
      provider: ctx.provider.kind,
      ...(refusedByServer ? { resource: audited.resource } : {}),
    },
  });
}

/**
 * The callback at `callbackUrl` (state `state`, already claimed) for the sign-in that stored
 * `started`: every sign-in comes back to the one registered redirect URI (PUBLIC_URL/oauth/callback).
 */
export async function authenticateUpstream(
  ctx: GrantsContext,
  callback: { readonly callbackUrl: URL; readonly state: string; readonly started: StartedUpstreamLogin },
  /** `resource`: the MCP server the sign-in is for (its access rules apply too); none for /account. */
  audited: Audited,
): Promise<UpstreamAuthentication> {
  const exchanged = await exchange(ctx, callback);
  if ("outcome" in exchanged) return exchanged;
  const { tokens, identity } = exchanged;
  // For an MCP server (a client's authorization): the global policy and that server's own rules, so
  // that an account the server does not admit is refused here, not handed a token that fails later.
  const decision = audited.resource === undefined ? ctx.policy.decide(identity) : grantAccess(ctx, audited.resource, factsOf(identity));
  if (decision.admitted) return { outcome: "admitted", tokens, identity, rule: decision.rule };
  await refuse(ctx, tokens, identity, audited, "refusedBy" in decision && decision.refusedBy !== "policy");
  return {
    outcome: "refused",
    account: { subject: identity.subject, login: identity.login, providerName: ctx.provider.displayName, reason: decision.reason },
  };
}
