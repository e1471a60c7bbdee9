// Sign-in to the connected-apps page (/account): an upstream login with no client behind it. It
// produces no grant and keeps no upstream token; only who signed in, remembered for this browser
// (browser-identities.ts). It comes back through the one registered callback: the callback
// recognizes its state (owns) and hands it here. A pending sign-in is bound to the browser by a
// cookie of its own, like an authorization's (transactions.ts), so that a sign-in elsewhere in the
// same browser (which gives it a new session id) does not cancel it. Every form of the page
// carries a CSRF token derived from the browser session, with its own key.
import { createHmac, randomUUID } from "node:crypto";
import { callbackUrl } from "../config/load.ts";
import { constantTimeEqual } from "../crypto/tokens.ts";
import type { GrantsContext } from "./context.ts";
import { PageError } from "./errors.ts";
import { audit } from "./audit.ts";
import { authenticateUpstream, type BrowserCallback, type RefusedAccount } from "./upstream-authentication.ts";
import type { BrowserIdentities, BrowserIdentity } from "./browser-identities.ts";
import type { UpstreamError } from "../upstream/provider.ts";
import { firstLine } from "../lib/error-text.ts";
import { alreadyUsed, claimCallback, type PendingSignIn, type SignInStore } from "./callback-claim.ts";
import type { AccountLoginRow } from "../store/db-types.ts";

/** How long an account sign-in may wait for its callback. */
export const ACCOUNT_LOGIN_TTL_SECONDS = 600;

export type AccountSignInOutcome = AccountSignInResult & {
  /** The sign-in that ended (its binding cookie can go). */
  readonly loginId: string;
};

export type AccountSignInResult =
  /** With the browser's new session id (browser-identities.ts: signIn). */
  | { readonly kind: "signed_in"; readonly identity: Omit<BrowserIdentity, "signedInAt">; readonly browserSessionId: string }
  /** The access policy does not admit the account: it gets nothing, the page says so. */
  | { readonly kind: "refused"; readonly account: RefusedAccount }
  /** The IdP cancelled, refused, failed or could not be reached. */
  | { readonly kind: "failed"; readonly reason: "cancelled" | UpstreamError["kind"] };

const START_AGAIN = "Open the connected apps page again and sign in from there.";

export class AccountSignIn {
  constructor(
    private readonly ctx: GrantsContext,
    private readonly browserIdentities: BrowserIdentities,
    private readonly csrfKey: Uint8Array,
  ) {}

  /** The CSRF token of every form of the account page in this browser session. */
  csrfToken(browserSessionId: string): string {
    return createHmac("sha256", this.csrfKey).update(`account.${browserSessionId}`).digest("base64url");
  }

  csrfValid(browserSessionId: string | null, presented: string | undefined): boolean {
    return Boolean(browserSessionId && presented && constantTimeEqual(presented, this.csrfToken(browserSessionId)));
  }

  /** What the browser that started the sign-in holds in its cookie (http/transaction-cookie.ts). */
  binding(loginId: string): string {
    return createHmac("sha256", this.csrfKey).update(`browser.${loginId}`).digest("base64url");
  }

  /**
   * Starts an upstream sign-in for this browser and returns the IdP's authorization URL, and the
   * sign-in to bind to the browser until it expires. With `selectAccount` the IdP is asked to let
   * the person pick another account.
   */
  async start(
    browserSessionId: string,
    options: { readonly selectAccount?: boolean } = {},
  ): Promise<{ readonly url: string; readonly loginId: string; readonly expiresAt: Date }> {
    let request: Awaited<ReturnType<GrantsContext["provider"]["createAuthorizationRequest"]>>;
    try {
      request = await this.ctx.provider.createAuthorizationRequest(callbackUrl(this.ctx.config.publicUrl), options);
    } catch (err) {
      this.ctx.logger.error({ err: firstLine(err) }, "cannot start the account sign-in");
      throw new PageError(
        "temporarily_unavailable",
        `${this.ctx.provider.displayName} is not reachable`,
        `The sign-in service could not be reached: ${firstLine(err)}`,
        "Try again in a moment.",
      );
    }
    const loginId = randomUUID();
    const expiresAt = new Date(this.ctx.clock.now() + ACCOUNT_LOGIN_TTL_SECONDS * 1000);
    await this.ctx.db.accountLogin.create({
      data: {
        id: loginId,
        browserSessionId,
        upstreamState: request.state,
        upstreamNonce: request.nonce ?? null,
        upstreamVerifierEnc: await this.ctx.secrets.encrypt(request.codeVerifier),
        status: "pending",
        expiresAt,
      },
    });
    return { url: request.url, loginId, expiresAt };
  }

  /** Whether an upstream callback with this state belongs to an account sign-in. */
  async owns(state: string): Promise<boolean> {
    return (await this.ctx.db.accountLogin.count({ where: { upstreamState: state } })) > 0;
  }

  /** Ends a sign-in whose callback was refused or failed; only one not yet ended. */
  private async end(id: string, from: "pending" | "exchanging"): Promise<void> {
    await this.ctx.db.accountLogin.updateMany({ where: { id, status: from }, data: { status: "failed", upstreamVerifierEnc: null } });
  }

  /** How an account sign-in is found, checked and taken by the shared claim step. */
  private claimStore(bindingOf: (loginId: string) => string | null): SignInStore<AccountLoginRow & PendingSignIn> {
    const db = this.ctx.db;
    return {
      find: async (state) => {
        const login = await db.accountLogin.findUnique({ where: { upstreamState: state } });
        return login && { ...login, waiting: login.status === "pending" };
      },
      boundHere: (login) => {
        const presented = bindingOf(login.id);
        return presented !== null && constantTimeEqual(presented, this.binding(login.id));
      },
      // A leaked callback URL must not sign in anyone later, in this browser or another.
      abandon: (login) => this.end(login.id, "pending"),
      take: async (login, deadline) =>
        (await db.accountLogin.updateMany({ where: { id: login.id, status: "pending" }, data: { status: "exchanging", expiresAt: deadline } })).count === 1,
      startAgain: START_AGAIN,
      startAgainInOneBrowser: "Sign in again from the connected apps page, in one browser.",
      noun: "sign-in",
    };
  }

  /**
   * Completes the sign-in: only in the browser that started it, once, before it expires. Problems
   * with the response itself (unknown, replayed, foreign) are PageErrors.
   */
  async complete(input: BrowserCallback & { readonly bindingOf: (loginId: string) => string | null }): Promise<AccountSignInOutcome> {
    const { row: login, state } = await claimCallback(input.callbackUrl, this.claimStore(input.bindingOf), this.ctx.clock, this.ctx.config.upstream.timeoutMs);
    const upstreamError = input.callbackUrl.searchParams.get("error");
    if (upstreamError) {
      await this.end(login.id, "exchanging");
      return {
        loginId: login.id,
        kind: "failed",
        reason: upstreamError === "access_denied" ? "cancelled" : upstreamError === "temporarily_unavailable" ? "unavailable" : "protocol",
      };
    }

    const signIn = await authenticateUpstream(this.ctx, { callbackUrl: input.callbackUrl, state, started: login }, { ip: input.ip });
    if (signIn.outcome !== "admitted") {
      await this.end(login.id, "exchanging");
      return signIn.outcome === "refused"
        ? { loginId: login.id, kind: "refused", account: signIn.account }
        : { loginId: login.id, kind: "failed", reason: signIn.kind };
    }

    const { identity, tokens } = signIn;
    const done = await this.ctx.db.accountLogin.updateMany({
      where: { id: login.id, status: "exchanging" },
      data: { status: "completed", upstreamVerifierEnc: null },
    });
    // The page keeps no upstream token: give it back whatever happens next.
    await this.ctx.provider.revoke(tokens).catch((err: unknown) => {
      this.ctx.logger.warn({ err: firstLine(err), subject: identity.subject }, "could not revoke the account page's upstream token (best effort)");
    });
    // Past its deadline the sweep may have removed it: then nobody is signed in.
    if (done.count !== 1) throw alreadyUsed(START_AGAIN);
    const remembered = { subject: identity.subject, login: identity.login, provider: this.ctx.provider.kind };
    const browserSessionId = await this.browserIdentities.signIn(input.browserSessionId, remembered);
    await audit(this.ctx.db, {
      type: "account.signed_in",
      subject: identity.subject,
      ip: input.ip,
      detail: { provider: this.ctx.provider.kind, login: identity.login, rule: signIn.rule },
    });
    return { loginId: login.id, kind: "signed_in", identity: remembered, browserSessionId };
  }

  /** Sign out: this browser forgets who it was and every consent it remembered. */
  async signOut(browserSessionId: string, ip?: string): Promise<void> {
    const identity = await this.browserIdentities.of(browserSessionId);
    await this.browserIdentities.forget(browserSessionId);
    if (identity) await audit(this.ctx.db, { type: "account.signed_out", subject: identity.subject, ip, detail: { provider: identity.provider } });
  }
}
