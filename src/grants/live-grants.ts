// The one definition of a live grant as a query: not revoked, used recently enough (idle timeout)
// and younger than its maximum age. grantDeathReason (lifecycle.ts) is the same rule for a grant
// already loaded.
import type { Prisma } from "../store/db.ts";

export function liveGrantWhere(now: Date = new Date()): Prisma.GrantWhereInput {
  return { revokedAt: null, idleExpiresAt: { gt: now }, absoluteExpiresAt: { gt: now } };
}
