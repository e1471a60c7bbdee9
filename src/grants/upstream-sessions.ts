// The secure mapping to upstream sessions: upstream tokens live here, encrypted, and are checked
// (and refreshed when they expire) before any broker token standing on them is honoured.
import { randomUUID } from "node:crypto";
import type { GrantsContext } from "./context.ts";
import type { GrantLifecycle } from "./lifecycle.ts";
import { CredentialRejected, UpstreamUnavailable } from "./errors.ts";
import { audit } from "./audit.ts";
import { SingleFlight } from "./single-flight.ts";
import { UpstreamError, type UpstreamIdentity, type UpstreamTokens } from "../upstream/provider.ts";
import type { Tx } from "../store/db.ts";
import { dateOf } from "./clock.ts";

export interface CheckedSession {
  readonly id: string;
  readonly subject: string;
  readonly login: string | null;
  readonly lastCheckedAt: Date;
}

export class UpstreamSessions {
  private readonly checks = new SingleFlight<CheckedSession>();
  readonly stats = { checks: 0, refreshes: 0 };

  constructor(
    private readonly ctx: GrantsContext,
    private readonly lifecycle: GrantLifecycle,
  ) {}

  /** Stores a new upstream session (tokens encrypted) inside the caller's transaction. */
  async create(tx: Tx, identity: UpstreamIdentity, tokens: UpstreamTokens, now: Date): Promise<string> {
    const id = randomUUID();
    await tx.upstreamSession.create({
      data: {
        id,
        provider: this.ctx.provider.kind,
        subject: identity.subject,
        login: identity.login,
        email: identity.email ?? null,
        profile: JSON.stringify(identity.profile),
        ...(await this.encryptTokens(tokens)),
        lastCheckedAt: now,
        status: "active",
      },
    });
    return id;
  }

  async tokensOf(sessionId: string): Promise<UpstreamTokens | null> {
    const row = await this.ctx.db.upstreamSession.findUnique({ where: { id: sessionId } });
    return row ? this.decryptTokens(row) : null;
  }

  /**
   * Makes sure the upstream session was found good within UPSTREAM_RECHECK_SECONDS (0: now).
   * Concurrent callers for one session share one upstream call. Throws CredentialRejected when the
   * upstream session is dead (its grants are then revoked) and UpstreamUnavailable when the
   * upstream cannot answer (fail closed).
   */
  ensureChecked(sessionId: string): Promise<CheckedSession> {
    return this.checks.run(sessionId, () => this.check(sessionId));
  }

  private async check(sessionId: string): Promise<CheckedSession> {
    const row = await this.ctx.db.upstreamSession.findUnique({ where: { id: sessionId } });
    if (row?.status !== "active") throw new CredentialRejected("the upstream login behind this token has ended");
    const now = this.ctx.clock.now();
    const window = this.ctx.config.upstreamRecheckSeconds * 1000;
    const view = { id: row.id, subject: row.subject, login: row.login };
    if (window > 0 && now - row.lastCheckedAt.getTime() < window) return { ...view, lastCheckedAt: row.lastCheckedAt };

    const tokens = await this.decryptTokens(row);
    let status: "active" | "invalid" | "expired";
    let reason = "";
    let accessExpiresAt = tokens.accessExpiresAt;
    if (tokens.accessExpiresAt && tokens.accessExpiresAt.getTime() <= now) status = "expired";
    else {
      this.stats.checks++;
      const result = await this.callUpstream(() => this.ctx.provider.check(tokens));
      status = result.status;
      if (result.status === "invalid") reason = result.reason;
      if (result.status === "active" && result.accessExpiresAt) accessExpiresAt = result.accessExpiresAt;
    }

    if (status === "expired") return this.refresh(sessionId, tokens, view);
    if (status === "invalid") {
      await audit(this.ctx.db, { type: "upstream.invalid", subject: row.subject, detail: { upstreamSession: sessionId, reason } });
      await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_invalid");
      throw new CredentialRejected("the upstream identity provider no longer accepts this login; authorize again");
    }
    const checkedAt = dateOf(this.ctx.clock);
    await this.ctx.db.upstreamSession.update({ where: { id: sessionId }, data: { lastCheckedAt: checkedAt, accessExpiresAt: accessExpiresAt ?? null } });
    return { ...view, lastCheckedAt: checkedAt };
  }

  private async refresh(sessionId: string, tokens: UpstreamTokens, view: Omit<CheckedSession, "lastCheckedAt">): Promise<CheckedSession> {
    if (!this.ctx.provider.canRefresh(tokens)) {
      await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_refresh_failed");
      throw new CredentialRejected("the upstream login expired and cannot be renewed; authorize again");
    }
    let fresh: UpstreamTokens;
    this.stats.refreshes++;
    try {
      fresh = await this.callUpstream(() => this.ctx.provider.refresh(tokens));
    } catch (err) {
      if (err instanceof UpstreamUnavailable) throw err;
      await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_refresh_failed");
      throw new CredentialRejected("the upstream identity provider refused to renew this login; authorize again");
    }
    const checkedAt = dateOf(this.ctx.clock);
    // The rotated upstream refresh token is stored in the same write as the new access token:
    // losing it would orphan the session.
    await this.ctx.db.upstreamSession.update({
      where: { id: sessionId },
      data: { ...(await this.encryptTokens({ ...fresh, refreshToken: fresh.refreshToken ?? tokens.refreshToken })), lastCheckedAt: checkedAt },
    });
    await audit(this.ctx.db, { type: "upstream.refreshed", subject: view.subject, detail: { upstreamSession: sessionId } });
    return { ...view, lastCheckedAt: checkedAt };
  }

  /** Runs an upstream call; network failures, timeouts and 5xx become UpstreamUnavailable. */
  private async callUpstream<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof UpstreamError && err.kind !== "unavailable" && err.kind !== "misconfigured") throw err;
      const message = err instanceof Error ? err.message : String(err);
      this.ctx.logger.warn({ err: message }, "upstream identity provider unavailable");
      throw new UpstreamUnavailable("the upstream identity provider is not reachable right now; retry shortly");
    }
  }

  private async encryptTokens(tokens: UpstreamTokens) {
    return {
      accessTokenEnc: await this.ctx.secrets.encrypt(tokens.accessToken),
      refreshTokenEnc: await this.ctx.secrets.encryptOptional(tokens.refreshToken),
      idTokenEnc: await this.ctx.secrets.encryptOptional(tokens.idToken),
      scope: tokens.scope ?? null,
      accessExpiresAt: tokens.accessExpiresAt ?? null,
    };
  }

  private async decryptTokens(row: {
    accessTokenEnc: string;
    refreshTokenEnc: string | null;
    idTokenEnc: string | null;
    scope: string | null;
    accessExpiresAt: Date | null;
  }): Promise<UpstreamTokens> {
    return {
      accessToken: await this.ctx.secrets.decrypt(row.accessTokenEnc),
      refreshToken: (await this.ctx.secrets.decryptOptional(row.refreshTokenEnc)) ?? undefined,
      idToken: (await this.ctx.secrets.decryptOptional(row.idTokenEnc)) ?? undefined,
      scope: row.scope ?? undefined,
      accessExpiresAt: row.accessExpiresAt ?? undefined,
    };
  }
}
