// The life and death of grants: deadlines (idle and absolute timeouts), revocation with its
// cascade to every broker token and, when no live grant still needs it, to the upstream token.
import { liveGrantWhere } from "./live-grants.ts";
import type { GrantsContext, RevocationBus } from "./context.ts";
import { audit } from "./audit.ts";
import type { Tx } from "../store/db.ts";
import { dateOf } from "../lib/clock.ts";
import { firstLine } from "../lib/error-text.ts";

export type RevocationReason =
  | "client_revoked"
  | "operator"
  | "refresh_reuse"
  | "code_replay"
  | "upstream_invalid"
  | "upstream_refresh_failed"
  /** Its stored upstream tokens cannot be decrypted (SECRET_KEY changed without SECRET_KEY_PREVIOUS). */
  | "upstream_unreadable"
  | "policy_denied"
  /** The access rules of the grant's MCP server no longer admit its user (or the server left the catalogue). */
  | "server_access_denied"
  /** Its MCP server was removed from the catalogue by a reload. */
  | "server_removed"
  | "user_revoked"
  | "idle_timeout"
  | "max_age"
  | "client_removed"
  /** The user disconnected a connected account its MCP server needs. */
  | "connection_removed"
  /** The connected account its MCP server needs is gone (revoked at the service) and the client cannot be sent to reconnect it. */
  | "connection_invalid";

export interface GrantDeadlines {
  readonly revokedAt: Date | null;
  readonly idleExpiresAt: Date;
  readonly absoluteExpiresAt: Date;
}

/** How and when a grant ended: its revocation reason, or the timeout that ended it. */
export interface GrantEnd {
  readonly reason: RevocationReason | "revoked";
  readonly at: Date;
}

/** How a grant ended, or null when it is alive at `now`. */
export function grantEnd(grant: GrantDeadlines & { readonly revokedReason?: string | null }, now: Date): GrantEnd | null {
  if (grant.revokedAt) return { reason: (grant.revokedReason as RevocationReason | null) ?? "revoked", at: grant.revokedAt };
  if (now >= grant.absoluteExpiresAt) return { reason: "max_age", at: grant.absoluteExpiresAt };
  if (now >= grant.idleExpiresAt) return { reason: "idle_timeout", at: grant.idleExpiresAt };
  return null;
}

/** Why a grant is dead, for its holder, or null when it is alive at `now`. */
export function grantDeathReason(grant: GrantDeadlines, now: Date): string | null {
  const end = grantEnd(grant, now);
  if (!end) return null;
  if (grant.revokedAt) return "the grant was revoked";
  return end.reason === "max_age" ? "the session reached its maximum age; authorize again" : "the session was idle too long; authorize again";
}

export function initialDeadlines(config: GrantsContext["config"], now: Date): { lastUsedAt: Date; idleExpiresAt: Date; absoluteExpiresAt: Date } {
  return {
    lastUsedAt: now,
    idleExpiresAt: new Date(now.getTime() + config.sessionIdleTimeoutSeconds * 1000),
    absoluteExpiresAt: new Date(now.getTime() + config.sessionMaxAgeSeconds * 1000),
  };
}

/**
 * Marks the grants and their unused codes revoked, with a grant.revoked audit event each (naming
 * its user and client), inside the caller's transaction. Their tokens are left as they are: every
 * use reads a token's grant and refuses it for the grant's revocation, and no index finds tokens by
 * grant (prisma/sqlite/schema.prisma says why). Returns the ids revoked now.
 */
export async function revokeGrantsInTx(tx: Tx, grantIds: readonly string[], reason: RevocationReason, now: Date): Promise<string[]> {
  if (grantIds.length === 0) return [];
  const live = await tx.grant.findMany({ where: { id: { in: [...grantIds] }, revokedAt: null }, select: { id: true, subject: true, clientId: true } });
  const ids = live.map((g) => g.id);
  if (ids.length === 0) return [];
  for (const g of live) await audit(tx, { type: "grant.revoked", grantId: g.id, subject: g.subject, clientId: g.clientId, detail: { reason } });
  await tx.grant.updateMany({ where: { id: { in: ids }, revokedAt: null }, data: { revokedAt: now, revokedReason: reason } });
  await tx.authorizationCode.updateMany({ where: { grantId: { in: ids }, consumedAt: null }, data: { consumedAt: now } });
  return ids;
}

export class GrantLifecycle {
  constructor(
    private readonly ctx: GrantsContext,
    private readonly bus: RevocationBus,
  ) {}

  /** Revokes grants and their tokens; then the upstream tokens no live grant needs any more. */
  async revokeGrants(grantIds: readonly string[], reason: RevocationReason): Promise<string[]> {
    const now = dateOf(this.ctx.clock);
    const revoked = await this.ctx.db.$transaction(async (tx) => {
      return revokeGrantsInTx(tx, grantIds, reason, now);
    });
    this.bus.publish({ grantIds: revoked });
    await this.releaseUpstreamSessionsOf(revoked);
    return revoked;
  }

  async revokeGrant(grantId: string, reason: RevocationReason): Promise<boolean> {
    return (await this.revokeGrants([grantId], reason)).length > 0;
  }

  /** Every live grant of one upstream user (e.g. `github:583231`). */
  async revokeSubject(subject: string, reason: RevocationReason): Promise<string[]> {
    const grants = await this.ctx.db.grant.findMany({ where: { subject, revokedAt: null }, select: { id: true } });
    return this.revokeGrants(
      grants.map((g) => g.id),
      reason,
    );
  }

  /** Every live grant for these resources (MCP servers a reload removed). */
  async revokeResources(resources: readonly string[], reason: RevocationReason): Promise<string[]> {
    if (resources.length === 0) return [];
    const grants = await this.ctx.db.grant.findMany({ where: { resource: { in: [...resources] }, revokedAt: null }, select: { id: true } });
    return this.revokeGrants(
      grants.map((g) => g.id),
      reason,
    );
  }

  /** Every live grant that stands on one upstream session (the upstream said it is dead). */
  async revokeUpstreamSession(sessionId: string, reason: RevocationReason): Promise<string[]> {
    return this.revokeUpstreamSessions([sessionId], reason);
  }

  /**
   * Every live grant that stands on these upstream sessions. The sessions are marked dead first, so
   * the release step does not try to give their tokens back upstream (nothing is left to revoke, or
   * nothing can be read).
   */
  async revokeUpstreamSessions(sessionIds: readonly string[], reason: RevocationReason): Promise<string[]> {
    if (sessionIds.length === 0) return [];
    const grants = await this.ctx.db.grant.findMany({ where: { upstreamSessionId: { in: [...sessionIds] }, revokedAt: null }, select: { id: true } });
    await this.ctx.db.upstreamSession.updateMany({
      where: { id: { in: [...sessionIds] }, status: "active" },
      data: { status: "revoked", revokedAt: dateOf(this.ctx.clock), revokedReason: reason },
    });
    return this.revokeGrants(
      grants.map((g) => g.id),
      reason,
    );
  }

  /**
   * Revokes the upstream token of every session behind these grants that no live grant uses any
   * more. Best effort: the broker's own tokens are already dead; a failure is logged and audited.
   */
  private async releaseUpstreamSessionsOf(grantIds: readonly string[]): Promise<void> {
    if (grantIds.length === 0) return;
    const grants = await this.ctx.db.grant.findMany({ where: { id: { in: [...grantIds] } }, select: { upstreamSessionId: true } });
    const sessionIds = [...new Set(grants.map((g) => g.upstreamSessionId).filter((id): id is string => id !== null))];
    const now = dateOf(this.ctx.clock);
    for (const sessionId of sessionIds) {
      const stillUsed = await this.ctx.db.grant.count({
        where: { upstreamSessionId: sessionId, ...liveGrantWhere(now) },
      });
      if (stillUsed > 0) continue;
      // Claim the release so concurrent revocations call the upstream once; a session the
      // upstream already declared dead is not claimed (nothing left to revoke there).
      const claimed = await this.ctx.db.upstreamSession.updateMany({
        where: { id: sessionId, status: "active" },
        data: { status: "revoked", revokedAt: now, revokedReason: "no_live_grant" },
      });
      if (claimed.count === 0) continue;
      const session = await this.ctx.db.upstreamSession.findUniqueOrThrow({ where: { id: sessionId } });
      try {
        const accessToken = await this.ctx.secrets.decrypt(session.accessTokenEnc);
        const refreshToken = await this.ctx.secrets.decryptOptional(session.refreshTokenEnc);
        await this.ctx.provider.revoke({ accessToken, refreshToken: refreshToken ?? undefined });
        this.ctx.logger.info({ upstreamSession: sessionId, subject: session.subject }, "upstream token revoked");
      } catch (err) {
        this.ctx.logger.warn({ upstreamSession: sessionId, err: firstLine(err) }, "upstream token revocation failed (best effort)");
        await audit(this.ctx.db, {
          type: "upstream.revoke_failed",
          subject: session.subject,
          detail: { upstreamSession: sessionId, message: firstLine(err) },
        });
      }
    }
  }
}
