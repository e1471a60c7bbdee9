// The audit sink's backlog, kept in the audit trail itself: an event is pending until a sink took
// it (deliveredAt). Nothing is copied, so a restart, a crash or a receiver that is down for hours
// loses nothing the trail still holds (AUDIT_RETENTION_DAYS bounds it). Events are handed out
// oldest first; one marked delivered is never handed out again. A marker per event, not a cursor:
// events committed out of their time order (two connections, two instances) cannot be skipped.
import type { Db } from "../store/db.ts";
import { auditRecord, type AuditRecord } from "./audit-log.ts";

export interface AuditOutbox {
  /** At most `limit` events no sink has taken yet, oldest first. */
  pending(limit: number): Promise<AuditRecord[]>;
  /** Records that these events reached the sink. */
  delivered(ids: readonly string[], at: Date): Promise<void>;
}

export function auditOutbox(db: Pick<Db, "auditEvent">): AuditOutbox {
  return {
    async pending(limit) {
      const rows = await db.auditEvent.findMany({ where: { deliveredAt: null }, orderBy: [{ at: "asc" }, { id: "asc" }], take: limit });
      return rows.map(auditRecord);
    },
    async delivered(ids, at) {
      await db.auditEvent.updateMany({ where: { id: { in: [...ids] }, deliveredAt: null }, data: { deliveredAt: at } });
    },
  };
}
