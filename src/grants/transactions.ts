// Authorization transactions: a validated /authorize request waiting for the user's consent,
// bound to the browser that made it by a cookie of its own carrying the transaction's binding (an
// HMAC of its id: nobody without the server's key can make it, and the broker need not store it).
// The consent form's CSRF token is derived the same way, so a repeated GET shows the same valid form.
import { createHmac, randomBytes } from "node:crypto";
import type { Db } from "../store/db.ts";
import { constantTimeEqual } from "../crypto/tokens.ts";
import type { ValidatedAuthorizationRequest } from "./types.ts";
import { audit } from "./audit.ts";
import { dateOf, systemClock, type Clock } from "../lib/clock.ts";

export const TRANSACTION_TTL_SECONDS = 600;

export type Transaction = NonNullable<Awaited<ReturnType<Db["authTransaction"]["findUnique"]>>>;

export class AuthorizationTransactions {
  constructor(
    private readonly db: Db,
    private readonly csrfKey: Uint8Array,
    private readonly clock: Clock = systemClock,
  ) {}

  csrfToken(transactionId: string): string {
    return createHmac("sha256", this.csrfKey).update(`csrf.${transactionId}`).digest("base64url");
  }

  /** What the browser that started the transaction holds in its cookie (http/transaction-cookie.ts). */
  binding(transactionId: string): string {
    return createHmac("sha256", this.csrfKey).update(`browser.${transactionId}`).digest("base64url");
  }

  /** Whether `presented` (the browser's cookie for the transaction) is its binding. */
  boundTo(transactionId: string, presented: string | null): boolean {
    return presented !== null && constantTimeEqual(presented, this.binding(transactionId));
  }

  /** `browserSessionId`: the browser session it started in, kept for the record (the binding is the cookie). */
  async create(request: ValidatedAuthorizationRequest, browserSessionId: string): Promise<Transaction> {
    return this.db.authTransaction.create({
      data: {
        id: randomBytes(24).toString("base64url"),
        clientId: request.clientId,
        redirectUri: request.redirectUri,
        codeChallenge: request.codeChallenge,
        codeChallengeMethod: request.codeChallengeMethod,
        resource: request.resource,
        scope: request.scope,
        state: request.state,
        protocolVersion: request.protocolVersion,
        browserSessionId,
        status: "pending",
        expiresAt: new Date(this.clock.now() + TRANSACTION_TTL_SECONDS * 1000),
      },
    });
  }

  async get(id: string): Promise<Transaction | null> {
    return this.db.authTransaction.findUnique({ where: { id } });
  }

  /** A pending, unexpired transaction, when `presented` is its binding (the browser that started it); else null. */
  async pendingFor(id: string, presented: string | null): Promise<Transaction | null> {
    if (id.length > 100 || !this.boundTo(id, presented)) return null;
    const tx = await this.db.authTransaction.findUnique({ where: { id } });
    if (tx?.status !== "pending" || tx.expiresAt <= dateOf(this.clock)) return null;
    return tx;
  }

  /**
   * A transaction waiting for connected accounts (after its sign-in), unexpired, when `presented`
   * is its binding and, with `csrf`, the form's token is its own; else null.
   */
  async connectingFor(id: string, presented: string | null, csrf?: string): Promise<Transaction | null> {
    if (id.length > 100 || !this.boundTo(id, presented)) return null;
    if (csrf !== undefined && !constantTimeEqual(csrf, this.csrfToken(id))) return null;
    const tx = await this.db.authTransaction.findUnique({ where: { id } });
    if (tx?.status !== "connecting" || tx.expiresAt <= dateOf(this.clock)) return null;
    return tx;
  }

  /** Ends a transaction the user cancelled at its connect step; false when it was not waiting. */
  async cancelConnecting(id: string): Promise<boolean> {
    return (await this.db.authTransaction.updateMany({ where: { id, status: "connecting" }, data: { status: "denied" } })).count === 1;
  }

  /**
   * Records the user's decision, once: only from the browser that started the transaction (its
   * binding presented), with the form's CSRF token, while it is pending. Returns false when any of
   * that does not hold.
   */
  async decide(id: string, presented: string | null, csrf: string, decision: "approved" | "denied", ip?: string): Promise<boolean> {
    if (id.length > 100 || !this.boundTo(id, presented) || !constantTimeEqual(csrf, this.csrfToken(id))) return false;
    const now = dateOf(this.clock);
    const claimed = await this.db.authTransaction.updateMany({
      where: { id, status: "pending", expiresAt: { gt: now } },
      data: { status: decision, approvedAt: decision === "approved" ? now : null },
    });
    if (claimed.count !== 1) return false;
    const tx = await this.db.authTransaction.findUniqueOrThrow({ where: { id } });
    await audit(this.db, { type: decision === "approved" ? "consent.approved" : "consent.denied", clientId: tx.clientId, ip, detail: { scope: tx.scope } });
    return true;
  }

  /** Approval without a form, for a consent this browser already gave. */
  async approveRemembered(id: string): Promise<boolean> {
    const claimed = await this.db.authTransaction.updateMany({
      where: { id, status: "pending" },
      data: { status: "approved", approvedAt: dateOf(this.clock) },
    });
    return claimed.count === 1;
  }
}
