// The audit trail of security events. Never records a token, code or secret.
import { timeOrderedRowId } from "../store/row-id.ts";
import type { Db } from "../store/db.ts";
import type { AuditEvent } from "../store/hot-store.ts";

export type AuditEventType =
  | "client.registered"
  | "client.removed"
  | "consent.approved"
  | "consent.denied"
  | "login.completed"
  | "login.failed"
  | "login.refused"
  | "account.signed_in"
  | "account.signed_out"
  | "account.revoked"
  | "token.issued"
  | "token.refreshed"
  | "token.revoked"
  | "grant.revoked"
  | "code.replayed"
  | "refresh.reused"
  | "upstream.invalid"
  | "upstream.refreshed"
  | "upstream.unreadable"
  | "access.policy_denied"
  /** A tools/call the server's tool rules refused (detail: server, tool, rule). */
  | "tool.denied"
  | "upstream.revoke_failed"
  /** A user connected an account at a service of `connections` (detail: connection, account). */
  | "connection.linked"
  | "connection.refreshed"
  /** The service refused a connection (revoked, refresh refused): the user must connect again. */
  | "connection.invalid"
  | "connection.disconnected"
  /** A server exchanged an identity assertion for a user's connection token (RFC 8693). */
  | "connection.token_exchanged"
  | "sweep.completed";

export interface AuditEntry {
  readonly type: AuditEventType;
  readonly clientId?: string | null | undefined;
  readonly grantId?: string | null | undefined;
  readonly subject?: string | null | undefined;
  readonly ip?: string | null | undefined;
  readonly detail?: Record<string, unknown>;
}

type AuditWriter = Pick<Db, "auditEvent">;

/** The row of one event, stamped with the system time as Prisma's default would (not the grants clock). */
export function auditRow(entry: AuditEntry): AuditEvent {
  return {
    id: timeOrderedRowId(),
    at: new Date(),
    type: entry.type,
    clientId: entry.clientId ?? null,
    grantId: entry.grantId ?? null,
    subject: entry.subject ?? null,
    ip: entry.ip ?? null,
    detail: JSON.stringify(entry.detail ?? {}),
    // Waiting for the audit sink (audit-sink/), if one is configured.
    deliveredAt: null,
  };
}

export async function audit(db: AuditWriter, entry: AuditEntry): Promise<void> {
  await db.auditEvent.create({ data: auditRow(entry) });
}
