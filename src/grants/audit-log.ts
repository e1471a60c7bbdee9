// Reading the audit trail back: what the `audit` command shows an operator. Newest last, like a log.
import type { Db } from "../store/db.ts";

export interface AuditFilter {
  /** Only events at or after this time. */
  readonly since?: Date | undefined;
  readonly subject?: string | undefined;
  readonly clientId?: string | undefined;
  /** An event type (`login.refused`) or its family (`login` matches every `login.*`). */
  readonly type?: string | undefined;
  /** At most this many events: the newest ones. */
  readonly limit: number;
}

export interface AuditRecord {
  readonly at: Date;
  readonly type: string;
  readonly subject: string | null;
  readonly clientId: string | null;
  readonly grantId: string | null;
  readonly ip: string | null;
  readonly detail: Record<string, unknown>;
}

function parseDetail(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
  } catch {
    return { text };
  }
}

export async function readAuditLog(db: Pick<Db, "auditEvent">, filter: AuditFilter): Promise<AuditRecord[]> {
  const type = filter.type?.trim();
  const rows = await db.auditEvent.findMany({
    where: {
      ...(filter.since ? { at: { gte: filter.since } } : {}),
      ...(filter.subject ? { subject: filter.subject } : {}),
      ...(filter.clientId ? { clientId: filter.clientId } : {}),
      ...(type ? (type.includes(".") ? { type } : { type: { startsWith: `${type}.` } }) : {}),
    },
    orderBy: [{ at: "desc" }, { id: "desc" }],
    take: filter.limit,
  });
  return rows.reverse().map((row) => ({
    at: row.at,
    type: row.type,
    subject: row.subject,
    clientId: row.clientId,
    grantId: row.grantId,
    ip: row.ip,
    detail: parseDetail(row.detail),
  }));
}
