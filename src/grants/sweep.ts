// The periodic sweep: removes what can never be used again, so tables do not grow without bound.
// Dead grants are kept a while (audit, "why was I logged out?") before they go.
import type { Db, Tx } from "../store/db.ts";
import { audit } from "./audit.ts";
import type { GrantLifecycle } from "./lifecycle.ts";
import { NEVER_USED_CLIENT, removeNeverUsedClients } from "./clients.ts";

export interface SweepResult {
  readonly transactions: number;
  readonly codes: number;
  readonly accessTokens: number;
  readonly refreshTokens: number;
  readonly grants: number;
  /** Grants that had timed out and were revoked now (their upstream tokens released). */
  readonly timedOut: number;
  readonly upstreamSessions: number;
  readonly consents: number;
  /** Account page sign-ins that expired or ended (their upstream verifier with them). */
  readonly accountLogins: number;
  /** Browsers whose remembered upstream sign-in expired. */
  readonly browserIdentities: number;
  /** MCP session bindings older than the longest a grant can live (SESSION_MAX_AGE_SECONDS). */
  readonly mcpSessions: number;
  readonly auditEvents: number;
  /** Self-registered clients nobody completed a sign-in with, past DYNAMIC_REGISTRATION_UNUSED_SECONDS. */
  readonly unusedClients: number;
  /** Such clients removed at registration since the last sweep, to stay within DYNAMIC_REGISTRATION_MAX_UNUSED. */
  readonly evictedClients: number;
  /** Rate limit buckets full again: a full bucket needs no row (store/rate-buckets.ts). */
  readonly rateLimitBuckets: number;
  /** Client assertions past their expiry: their jti can no longer be replayed (grants/client-assertion.ts). */
  readonly usedAssertions: number;
}

export interface SweepOptions {
  /** How long dead grants and their rows are kept after death (DEAD_GRANT_RETENTION_DAYS). */
  readonly retainDeadSeconds: number;
  /** How long audit events are kept (AUDIT_RETENTION_DAYS). */
  readonly retainAuditSeconds: number;
  /** How long an MCP session stays bound to its owner (SESSION_MAX_AGE_SECONDS: no grant outlives it). */
  readonly mcpSessionMaxAgeSeconds: number;
  /** How long a dynamically registered client that never completed a grant is kept (DYNAMIC_REGISTRATION_UNUSED_SECONDS). */
  readonly unusedClientSeconds: number;
  /** Never-used clients removed at registration since the last sweep (reported in the sweep's event). */
  readonly evictedClients?: number;
  readonly now?: Date;
}

/** Timed-out grants revoked (max age, then idle): how many. */
async function revokeTimedOut(db: Db, lifecycle: GrantLifecycle, now: Date): Promise<number> {
  const pastMaxAge = await db.grant.findMany({ where: { revokedAt: null, absoluteExpiresAt: { lte: now } }, select: { id: true } });
  const idle = await db.grant.findMany({ where: { revokedAt: null, idleExpiresAt: { lte: now } }, select: { id: true } });
  return (
    (
      await lifecycle.revokeGrants(
        pastMaxAge.map((g) => g.id),
        "max_age",
      )
    ).length +
    (
      await lifecycle.revokeGrants(
        idle.map((g) => g.id),
        "idle_timeout",
      )
    ).length
  );
}

/** Before these, a row of its kind can go. */
interface Cutoffs {
  readonly now: Date;
  readonly deadBefore: Date;
  readonly auditBefore: Date;
  readonly mcpSessionsBefore: Date;
  readonly unusedClientsBefore: Date;
}

type Removed = Omit<SweepResult, "timedOut" | "evictedClients">;

/** Every row that can never be used again, removed in one transaction; how many of each kind. */
async function removeDead(tx: Tx, { now, deadBefore, auditBefore, mcpSessionsBefore, unusedClientsBefore }: Cutoffs): Promise<Removed> {
  // A sign-in that waited for connected accounts in vain leaves its upstream session unused.
  const abandoned = await tx.authTransaction.findMany({
    where: { expiresAt: { lt: now }, upstreamSessionId: { not: null } },
    select: { upstreamSessionId: true },
  });
  const waited = abandoned.map((t) => t.upstreamSessionId).filter((id): id is string => id !== null);
  if (waited.length > 0) await tx.upstreamSession.deleteMany({ where: { id: { in: waited }, grants: { none: {} } } });
  const transactions = (await tx.authTransaction.deleteMany({ where: { expiresAt: { lt: now } } })).count;
  await tx.connectAttempt.deleteMany({ where: { expiresAt: { lt: now } } });
  const codes = (await tx.authorizationCode.deleteMany({ where: { expiresAt: { lt: now } } })).count;
  const accessTokens = (await tx.accessToken.deleteMany({ where: { OR: [{ expiresAt: { lt: now } }, { revokedAt: { lt: deadBefore } }] } })).count;
  const refreshTokens = (await tx.refreshToken.deleteMany({ where: { OR: [{ expiresAt: { lt: now } }, { revokedAt: { lt: deadBefore } }] } })).count;
  // Tokens of these grants go with them (onDelete: Cascade).
  const grants = (
    await tx.grant.deleteMany({
      where: { OR: [{ revokedAt: { lt: deadBefore } }, { absoluteExpiresAt: { lt: deadBefore } }, { idleExpiresAt: { lt: deadBefore } }] },
    })
  ).count;
  const upstreamSessions = (await tx.upstreamSession.deleteMany({ where: { status: { not: "active" }, grants: { none: {} } } })).count;
  const consents = (await tx.consent.deleteMany({ where: { expiresAt: { lt: now } } })).count;
  const accountLogins = (await tx.accountLogin.deleteMany({ where: { expiresAt: { lt: now } } })).count;
  const browserIdentities = (await tx.browserIdentity.deleteMany({ where: { expiresAt: { lt: now } } })).count;
  const mcpSessions = (await tx.mcpSession.deleteMany({ where: { createdAt: { lt: mcpSessionsBefore } } })).count;
  const auditEvents = (await tx.auditEvent.deleteMany({ where: { at: { lt: auditBefore } } })).count;
  // Registrations nobody finished (clients.ts NEVER_USED_CLIENT), unless a sign-in with one is
  // under way right now.
  const stale = await tx.client.findMany({
    where: { ...NEVER_USED_CLIENT, createdAt: { lt: unusedClientsBefore }, transactions: { none: { expiresAt: { gt: now } } } },
    select: { id: true },
  });
  const unusedClients = await removeNeverUsedClients(
    tx,
    stale.map((c) => c.id),
  );
  const rateLimitBuckets = (await tx.rateLimitBucket.deleteMany({ where: { fullAt: { lte: now.getTime() } } })).count;
  const usedAssertions = (await tx.usedAssertion.deleteMany({ where: { expiresAt: { lte: now } } })).count;
  return {
    transactions,
    codes,
    accessTokens,
    refreshTokens,
    grants,
    upstreamSessions,
    consents,
    accountLogins,
    browserIdentities,
    mcpSessions,
    auditEvents,
    unusedClients,
    rateLimitBuckets,
    usedAssertions,
  };
}

export async function sweep(db: Db, lifecycle: GrantLifecycle, options: SweepOptions): Promise<SweepResult> {
  const now = options.now ?? new Date();
  // Timed-out grants are revoked first, so the upstream tokens only they needed are released.
  const timedOut = await revokeTimedOut(db, lifecycle, now);
  const before = (seconds: number) => new Date(now.getTime() - seconds * 1000);
  const result = await db.$transaction((tx) =>
    removeDead(tx, {
      now,
      deadBefore: before(options.retainDeadSeconds),
      auditBefore: before(options.retainAuditSeconds),
      mcpSessionsBefore: before(options.mcpSessionMaxAgeSeconds),
      unusedClientsBefore: before(options.unusedClientSeconds),
    }),
  );
  const evictedClients = options.evictedClients ?? 0;
  await audit(db, { type: "sweep.completed", detail: { ...result, timedOut, evictedClients } });
  return { ...result, timedOut, evictedClients };
}
