// Connecting an account: the browser goes to the service (PKCE, state, nonce for OIDC) and comes
// back to /oauth/connect/callback, where the shared claim step (callback-claim.ts) finds the
// attempt by its state, in the browser session that started it, before it expires; the code is
// exchanged and the account linked to the user who started it. An attempt is part of an
// authorization (the consent page's connect step) or started from /account.
import { randomUUID } from "node:crypto";
import { connectCallbackUrl } from "../config/load.ts";
import { constantTimeEqual } from "../crypto/tokens.ts";
import { firstLine } from "../lib/error-text.ts";
import { UpstreamError, type UpstreamAuthorizationRequest } from "../upstream/provider.ts";
import type { ConnectAttemptRow } from "../store/db-types.ts";
import type { GrantsContext } from "./context.ts";
import type { Connections } from "./connections.ts";
import { PageError } from "./errors.ts";
import { audit } from "./audit.ts";
import { claimCallback, type PendingSignIn, type SignInStore } from "./callback-claim.ts";

/** How long a connect step may wait for the service's callback. */
export const CONNECT_ATTEMPT_TTL_SECONDS = 600;

export interface ConnectStart {
  readonly subject: string;
  readonly name: string;
  readonly browserSessionId: string;
  /** The authorization this step belongs to; undefined when started from /account. */
  readonly transactionId?: string | undefined;
}

/** Where a completed connect step leads back to. */
export interface ConnectOutcome {
  readonly name: string;
  readonly transactionId: string | null;
  /** The service refused or failed: said on the page the browser returns to. */
  readonly failure?: string | undefined;
}

const START_AGAIN = "Start connecting the account again from the page that asked you to.";

export class ConnectFlow {
  constructor(
    private readonly ctx: GrantsContext,
    private readonly connections: Connections,
  ) {}

  /** Starts a connect step; the URL of the service's authorization page. */
  async start(input: ConnectStart): Promise<string> {
    const config = this.connections.config(input.name);
    if (!config) throw new PageError("invalid_request", "Unknown connection", `No service named ${input.name} is configured here.`, "Check the link.");
    let request: UpstreamAuthorizationRequest;
    try {
      request = await this.connections.provider(config).createAuthorizationRequest(connectCallbackUrl(this.ctx.config.publicUrl));
    } catch (err) {
      this.ctx.logger.error({ connection: config.name, err: firstLine(err) }, "cannot start connecting an account");
      throw new PageError(
        "temporarily_unavailable",
        `${config.title} is not reachable`,
        `The service could not be reached: ${firstLine(err)}`,
        "Try again in a moment.",
      );
    }
    await this.ctx.db.connectAttempt.create({
      data: {
        id: randomUUID(),
        state: request.state,
        subject: input.subject,
        name: config.name,
        browserSessionId: input.browserSessionId,
        verifierEnc: await this.ctx.secrets.encrypt(request.codeVerifier),
        nonce: request.nonce ?? null,
        transactionId: input.transactionId ?? null,
        status: "waiting",
        expiresAt: new Date(this.ctx.clock.now() + CONNECT_ATTEMPT_TTL_SECONDS * 1000),
      },
    });
    return request.url;
  }

  private claimStore(browserSessionId: string | undefined): SignInStore<ConnectAttemptRow & PendingSignIn> {
    const db = this.ctx.db;
    const end = async (row: ConnectAttemptRow) => {
      await db.connectAttempt.updateMany({ where: { id: row.id, status: { in: ["waiting", "exchanging"] } }, data: { status: "failed", verifierEnc: null } });
    };
    return {
      find: async (state) => {
        const row = await db.connectAttempt.findUnique({ where: { state } });
        return row && { ...row, waiting: row.status === "waiting" };
      },
      boundHere: (row) => browserSessionId !== undefined && constantTimeEqual(row.browserSessionId, browserSessionId),
      abandon: end,
      take: async (row, deadline) =>
        (await db.connectAttempt.updateMany({ where: { id: row.id, status: "waiting" }, data: { status: "exchanging", expiresAt: deadline } })).count === 1,
      startAgain: START_AGAIN,
      startAgainInOneBrowser: "Connect the account again, in the browser you signed in with.",
      noun: "connection of an account",
    };
  }

  /**
   * Completes a connect step: the account linked to the user who started it. Callbacks that do
   * not belong here (unknown, replayed, another browser's) are PageErrors; a refusal or failure at
   * the service ends the step and is reported in the outcome.
   */
  async complete(callbackUrl: URL, browserSessionId: string | undefined, ip: string | undefined): Promise<ConnectOutcome> {
    const { row } = await claimCallback(callbackUrl, this.claimStore(browserSessionId), this.ctx.clock, this.ctx.config.upstream.timeoutMs);
    const config = this.connections.config(row.name);
    const finish = async (status: "completed" | "failed") => this.ctx.db.connectAttempt.update({ where: { id: row.id }, data: { status, verifierEnc: null } });
    const failed = async (failure: string): Promise<ConnectOutcome> => {
      await finish("failed");
      return { name: row.name, transactionId: row.transactionId, failure };
    };
    if (!config || !row.verifierEnc) return failed("This service is no longer configured here.");
    const title = config.title;
    const error = callbackUrl.searchParams.get("error");
    if (error)
      return failed(error === "access_denied" ? `Connecting your ${title} account was cancelled.` : `${title} reported an error (${error.slice(0, 60)}).`);
    try {
      const provider = this.connections.provider(config);
      const verifier = await this.ctx.secrets.decrypt(row.verifierEnc);
      const tokens = await provider.exchangeCode(
        { callbackUrl, expectedState: row.state, expectedNonce: row.nonce ?? undefined, codeVerifier: verifier },
        connectCallbackUrl(this.ctx.config.publicUrl),
      );
      const account = await provider.fetchIdentity(tokens);
      await this.connections.link(row.subject, config, tokens, account, ip);
    } catch (err) {
      const kind = err instanceof UpstreamError ? err.kind : "unavailable";
      this.ctx.logger.warn({ connection: config.name, kind, err: firstLine(err) }, "connecting an account failed");
      await audit(this.ctx.db, { type: "connection.invalid", subject: row.subject, ip, detail: { connection: config.name, reason: `connect_${kind}` } });
      return failed(kind === "unavailable" ? `${title} could not be reached; try again.` : `${title} did not complete the connection (${kind}).`);
    }
    await finish("completed");
    return { name: row.name, transactionId: row.transactionId };
  }
}
