// The upstream leg of an authorization (spec §5.6, steps 2–6): after consent, send the user to the
// upstream IdP; on the callback, exchange its code, read the identity, store the upstream session,
// create the grant and the broker's own authorization code, and hand back to the client.
import { callbackUrl } from "../config/load.ts";
import { serverByResource } from "../config/catalogue.ts";
import { randomUUID } from "node:crypto";
import type { GrantsContext } from "./context.ts";
import { PageError } from "./errors.ts";
import { dateOf } from "../lib/clock.ts";
import { initialDeadlines } from "./lifecycle.ts";
import type { UpstreamSessions } from "./upstream-sessions.ts";
import { mintSecret } from "./token-format.ts";
import { audit } from "./audit.ts";
import { clientRedirectUrl } from "./client-redirect.ts";
import type { UpstreamLoginStarter } from "./ports.ts";
import type { UpstreamAuthorizationRequest } from "../upstream/provider.ts";
import { authenticateUpstream, type AdmittedSignIn, type BrowserCallback, type RefusedAccount } from "./upstream-authentication.ts";
import { alreadyUsed, claimCallback, type PendingSignIn, type SignInStore } from "./callback-claim.ts";
import type { AuthTransactionRow as AuthTransaction } from "../store/db-types.ts";
import type { BrowserIdentities } from "./browser-identities.ts";
import type { AuthorizationTransactions } from "./transactions.ts";
import type { Consents } from "./consents.ts";
import { firstLine } from "../lib/error-text.ts";
import type { Connections } from "./connections.ts";
import { TRANSACTION_TTL_SECONDS } from "./transactions.ts";
import type { Tx } from "../store/db.ts";
import type { UpstreamIdentity, UpstreamTokens } from "../upstream/provider.ts";

/** Whose grant a code is issued for: a sign-in just completed, or one that waited for connected accounts. */
type SignedInUser =
  | { readonly kind: "new"; readonly identity: UpstreamIdentity; readonly tokens: UpstreamTokens; readonly rule: string }
  | { readonly kind: "stored"; readonly sessionId: string; readonly subject: string };

export const AUTHORIZATION_CODE_TTL_SECONDS = 60;

/** What a browser brings back to the callback of a client's authorization. */
export interface AuthorizationCallback extends BrowserCallback {
  /** The binding this browser presents for a transaction (its transaction cookie), or null. */
  readonly bindingOf: (transactionId: string) => string | null;
}

/** Where a completed callback leads. */
export type CallbackDestination =
  /** Back to the client: its redirect URI with the broker's code, or with an OAuth error. */
  | { readonly kind: "redirect"; readonly location: string }
  /**
   * Signed in, but the server needs connected accounts the user lacks: back to the consent page,
   * which shows the connect step (the transaction goes on, in this browser).
   */
  | { readonly kind: "connect"; readonly location: string; readonly waitsUntil: Date }
  /**
   * The account is not admitted by the access policy: a page says so to the person, and its button
   * returns to the client (this browser just approved it) with error=access_denied.
   */
  | {
      readonly kind: "refused";
      readonly account: RefusedAccount;
      /** The server the sign-in was for (its title): what the account may not use. */
      readonly serverTitle: string;
      readonly clientName: string | null;
      readonly returnTo: string;
    };

/**
 * Where a completed callback leads, the transaction it ended and, after a sign-in, the browser's
 * new session id (browser-identities.ts: signIn).
 */
export type CallbackOutcome = CallbackDestination & { readonly transactionId: string; readonly browserSessionId?: string };

const START_AGAIN = "Go back to your application and start the sign-in again.";

export class UpstreamLogin implements UpstreamLoginStarter {
  readonly providerName: string;

  constructor(
    private readonly ctx: GrantsContext,
    private readonly sessions: UpstreamSessions,
    private readonly browserIdentities: BrowserIdentities,
    private readonly transactions: AuthorizationTransactions,
    private readonly consents: Consents,
    private readonly connections?: Connections,
  ) {
    this.providerName = ctx.provider.displayName;
  }

  get callbackUri(): string {
    return callbackUrl(this.ctx.config.publicUrl);
  }

  /** Ends a transaction whose callback was refused; only one still waiting for its callback. */
  private async abandon(id: string, clientId: string, reason: string, ip: string | undefined): Promise<void> {
    const ended = await this.ctx.db.authTransaction.updateMany({ where: { id, status: "approved" }, data: { status: "failed", upstreamVerifierEnc: null } });
    if (ended.count === 1) await audit(this.ctx.db, { type: "login.failed", clientId, ip, detail: { reason } });
  }

  async start(transactionId: string, options: { readonly selectAccount?: boolean } = {}): Promise<string> {
    const tx = await this.ctx.db.authTransaction.findUnique({ where: { id: transactionId } });
    if (tx?.status !== "approved" || tx.expiresAt <= dateOf(this.ctx.clock)) {
      throw new PageError("invalid_request", "Sign-in expired", "This authorization request is no longer pending.", START_AGAIN);
    }
    let request: UpstreamAuthorizationRequest;
    try {
      request = await this.ctx.provider.createAuthorizationRequest(this.callbackUri, options);
    } catch (err) {
      this.ctx.logger.error({ err: firstLine(err) }, "cannot start the upstream login");
      throw new PageError(
        "temporarily_unavailable",
        `${this.providerName} is not reachable`,
        `The sign-in service could not be reached: ${firstLine(err)}`,
        "Try again in a moment.",
      );
    }
    await this.ctx.db.authTransaction.update({
      where: { id: transactionId },
      data: {
        upstreamState: request.state,
        upstreamNonce: request.nonce ?? null,
        upstreamVerifierEnc: await this.ctx.secrets.encrypt(request.codeVerifier),
      },
    });
    return request.url;
  }

  /** How this kind of sign-in is found, checked and taken by the shared claim step. */
  private claimStore(input: AuthorizationCallback): SignInStore<AuthTransaction & PendingSignIn> {
    const db = this.ctx.db;
    return {
      find: async (state) => {
        const tx = await db.authTransaction.findUnique({ where: { upstreamState: state } });
        return tx && { ...tx, waiting: tx.status === "approved" };
      },
      boundHere: (tx) => this.transactions.boundTo(tx.id, input.bindingOf(tx.id)),
      abandon: (tx, reason) => this.abandon(tx.id, tx.clientId, reason, input.ip),
      take: async (tx, deadline) =>
        (await db.authTransaction.updateMany({ where: { id: tx.id, status: "approved" }, data: { status: "exchanging", expiresAt: deadline } })).count === 1,
      startAgain: START_AGAIN,
      startAgainInOneBrowser: "Go back to your application and start the sign-in again in one browser.",
      noun: "authorization",
    };
  }

  /**
   * Completes the upstream login and returns where to send the browser: the client's redirect URI
   * with the broker's code (or an OAuth error). Problems that must not reach the client (unknown,
   * replayed or foreign callbacks) are PageErrors, shown to the person in the browser.
   */
  async complete(input: AuthorizationCallback): Promise<CallbackOutcome> {
    const { row: tx, state } = await claimCallback(input.callbackUrl, this.claimStore(input), this.ctx.clock, this.ctx.config.upstream.timeoutMs);
    const toClient = (params: Record<string, string>) =>
      clientRedirectUrl(tx.redirectUri, { ...params, ...(tx.state ? { state: tx.state } : {}), iss: this.ctx.config.publicUrl });
    const end = () => this.ctx.db.authTransaction.update({ where: { id: tx.id }, data: { status: "failed", upstreamVerifierEnc: null } });
    const fail = async (error: string, description: string, logDetail: string): Promise<CallbackOutcome> => {
      await end();
      await audit(this.ctx.db, { type: "login.failed", clientId: tx.clientId, ip: input.ip, detail: { error, reason: logDetail } });
      return { transactionId: tx.id, kind: "redirect", location: toClient({ error, error_description: description }) };
    };

    const upstreamError = input.callbackUrl.searchParams.get("error");
    if (upstreamError) {
      if (upstreamError === "access_denied") return fail("access_denied", `The sign-in at ${this.providerName} was cancelled or refused.`, upstreamError);
      if (upstreamError === "temporarily_unavailable")
        return fail("temporarily_unavailable", `${this.providerName} is temporarily unavailable; try again.`, upstreamError);
      return fail("server_error", `${this.providerName} reported an error during sign-in.`, upstreamError);
    }

    const signIn = await authenticateUpstream(
      this.ctx,
      { callbackUrl: input.callbackUrl, state, started: tx },
      { clientId: tx.clientId, ip: input.ip, resource: tx.resource },
    );
    if (signIn.outcome === "failed") {
      if (signIn.kind === "denied") return fail("access_denied", `The sign-in at ${this.providerName} was refused.`, signIn.message);
      if (signIn.kind === "unavailable") return fail("temporarily_unavailable", `${this.providerName} could not be reached; try again.`, signIn.message);
      return fail("server_error", `The sign-in at ${this.providerName} could not be completed.`, signIn.message);
    }
    if (signIn.outcome === "refused") {
      await end();
      const client = await this.ctx.db.client.findUnique({ where: { id: tx.clientId }, select: { clientName: true } });
      const serverTitle = serverByResource(this.ctx.config.catalogue, tx.resource)?.title ?? this.ctx.config.resourceName;
      return {
        transactionId: tx.id,
        kind: "refused",
        account: signIn.account,
        serverTitle,
        clientName: client?.clientName ?? null,
        returnTo: toClient({ error: "access_denied", error_description: `This ${this.providerName} account may not use ${serverTitle}.` }),
      };
    }
    const { identity: who } = signIn;
    if (this.connections && (await this.connections.missingFor(who.subject, tx.resource, signIn.tokens.scope)).length > 0)
      return this.awaitConnections(tx, signIn, input.browserSessionId);
    const code = await this.issueCode(tx, { kind: "new", identity: who, tokens: signIn.tokens, rule: signIn.rule }, input.ip);
    // Who signed in, for this browser's next consent page and its /account, under a new browser
    // session id; the consent this sign-in completes goes along.
    const { identity } = signIn;
    const browserSessionId = await this.browserIdentities.signIn(input.browserSessionId, {
      subject: identity.subject,
      login: identity.login,
      provider: this.ctx.provider.kind,
    });
    await this.consents.remember({ browserSessionId, clientId: tx.clientId, redirectUri: tx.redirectUri, scope: tx.scope, resource: tx.resource });
    return { transactionId: tx.id, browserSessionId, kind: "redirect", location: toClient({ code }) };
  }

  /**
   * Keeps an admitted sign-in whose server needs connected accounts the user lacks: its upstream
   * session stored, the transaction `connecting` (a fresh deadline for the connect steps), the
   * browser signed in. The consent page shows the connect step next.
   */
  private async awaitConnections(tx: AuthTransaction, signIn: AdmittedSignIn, browserSessionId: string | null): Promise<CallbackOutcome> {
    const now = dateOf(this.ctx.clock);
    const waitsUntil = new Date(now.getTime() + TRANSACTION_TTL_SECONDS * 1000);
    await this.ctx.db.$transaction(async (db) => {
      const sessionId = await this.sessions.create(db, signIn.identity, signIn.tokens, now);
      const moved = await db.authTransaction.updateMany({
        where: { id: tx.id, status: "exchanging" },
        data: { status: "connecting", upstreamSessionId: sessionId, upstreamVerifierEnc: null, expiresAt: waitsUntil },
      });
      if (moved.count !== 1) throw alreadyUsed(START_AGAIN);
    });
    const { identity } = signIn;
    const next = await this.browserIdentities.signIn(browserSessionId, { subject: identity.subject, login: identity.login, provider: this.ctx.provider.kind });
    await this.consents.remember({ browserSessionId: next, clientId: tx.clientId, redirectUri: tx.redirectUri, scope: tx.scope, resource: tx.resource });
    return {
      transactionId: tx.id,
      browserSessionId: next,
      kind: "connect",
      waitsUntil,
      location: `${this.ctx.config.publicUrl}/consent?transaction=${encodeURIComponent(tx.id)}`,
    };
  }

  /**
   * Ends the wait of a `connecting` transaction once every connection its server needs exists:
   * the grant and the code are made on the stored sign-in. Where to send the browser (the client,
   * with its code); a PageError when the transaction is not waiting or a connection still lacks.
   */
  async finishConnecting(tx: AuthTransaction, ip: string | undefined): Promise<string> {
    const session = tx.upstreamSessionId ? await this.ctx.db.upstreamSession.findUnique({ where: { id: tx.upstreamSessionId } }) : null;
    if (tx.status !== "connecting" || !session || session.status !== "active" || tx.expiresAt <= dateOf(this.ctx.clock))
      throw new PageError("invalid_request", "Sign-in expired", "This authorization request is no longer waiting.", START_AGAIN);
    const missing = this.connections ? await this.connections.missingFor(session.subject, tx.resource, session.scope) : [];
    if (missing.length > 0)
      throw new PageError(
        "invalid_request",
        "An account is not connected yet",
        `Connect your ${missing[0]!.title} account first.`,
        "Use the Connect button on the previous page.",
      );
    const taken = await this.ctx.db.authTransaction.updateMany({ where: { id: tx.id, status: "connecting" }, data: { status: "exchanging" } });
    if (taken.count !== 1) throw alreadyUsed(START_AGAIN);
    const code = await this.issueCode(tx, { kind: "stored", sessionId: session.id, subject: session.subject }, ip);
    return clientRedirectUrl(tx.redirectUri, { code, ...(tx.state ? { state: tx.state } : {}), iss: this.ctx.config.publicUrl });
  }

  /** The upstream session of a grant: stored now for a sign-in just completed, or the one kept while connecting. */
  private async sessionOf(db: Tx, user: SignedInUser, now: Date): Promise<{ readonly id: string; readonly subject: string }> {
    if (user.kind === "stored") return { id: user.sessionId, subject: user.subject };
    return { id: await this.sessions.create(db, user.identity, user.tokens, now), subject: user.identity.subject };
  }

  /**
   * Stores what an admitted sign-in produced, in one transaction: the upstream session, the grant,
   * the broker's authorization code, and the transaction completed. Its code, for the client.
   */
  private async issueCode(tx: AuthTransaction, user: SignedInUser, ip: string | undefined): Promise<string> {
    const code = mintSecret("authorizationCode");
    const issuedAt = dateOf(this.ctx.clock);
    const grantId = randomUUID();
    await this.ctx.db.$transaction(async (db) => {
      const session = await this.sessionOf(db, user, issuedAt);
      await db.grant.create({
        data: {
          id: grantId,
          clientId: tx.clientId,
          upstreamSessionId: session.id,
          subject: session.subject,
          kind: "authorization_code",
          resource: tx.resource,
          scope: tx.scope,
          ...initialDeadlines(this.ctx.config, issuedAt),
        },
      });
      await db.authorizationCode.create({
        data: {
          id: randomUUID(),
          codeHash: code.hash,
          grantId,
          clientId: tx.clientId,
          redirectUri: tx.redirectUri,
          codeChallenge: tx.codeChallenge,
          resource: tx.resource,
          scope: tx.scope,
          expiresAt: new Date(issuedAt.getTime() + AUTHORIZATION_CODE_TTL_SECONDS * 1000),
        },
      });
      // Still ours: past its deadline the sweep may have removed it (then nothing is issued).
      const done = await db.authTransaction.updateMany({
        where: { id: tx.id, status: "exchanging" },
        data: { status: "completed", upstreamVerifierEnc: null },
      });
      if (done.count !== 1) throw alreadyUsed(START_AGAIN);
      await audit(db, {
        type: "login.completed",
        clientId: tx.clientId,
        grantId,
        subject: session.subject,
        ip,
        detail: { provider: this.ctx.provider.kind, ...(user.kind === "new" ? { rule: user.rule } : { connected: true }) },
      });
    });
    return code.value;
  }
}
