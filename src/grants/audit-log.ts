// Reading the audit trail back: what the `audit` command shows an operator (newest last, like a log),
// and each event as one JSON object, the form the audit sink and `audit --follow --json` send.
import type { Db } from "../store/db.ts";
import type { AuditEvent } from "../store/hot-store.ts";
import { censorSensitive } from "../logger.ts";

export interface AuditFilter {
  /** Only events at or after this time. */
  readonly since?: Date | undefined;
  readonly subject?: string | undefined;
  readonly clientId?: string | undefined;
  /** An event type (`login.refused`) or its family (`login` matches every `login.*`). */
  readonly type?: string | undefined;
  /** At most this many events: the newest ones. */
  readonly limit: number;
  /**
   * Only events about one catalogue server: those of its grants, and those that name it (a refused
   * tool call's `server`, a refused sign-in's `resource`).
   */
  readonly server?: { readonly name: string; readonly resource: string } | undefined;
}

export interface AuditRecord {
  /** Unique per event: a receiver that got an event twice (at-least-once delivery) knows it by this. */
  readonly id: string;
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

function whereOf(filter: Omit<AuditFilter, "limit">, serverGrants: readonly string[] = []) {
  const type = filter.type?.trim();
  return {
    ...(filter.since ? { at: { gte: filter.since } } : {}),
    ...(filter.subject ? { subject: filter.subject } : {}),
    ...(filter.clientId ? { clientId: filter.clientId } : {}),
    ...(type ? (type.includes(".") ? { type } : { type: { startsWith: `${type}.` } }) : {}),
    ...(filter.server
      ? {
          OR: [
            { grantId: { in: [...serverGrants] } },
            { detail: { contains: `"server":${JSON.stringify(filter.server.name)}` } },
            { detail: { contains: `"resource":${JSON.stringify(filter.server.resource)}` } },
          ],
        }
      : {}),
  };
}

type AuditReader = Pick<Db, "auditEvent" | "grant">;

/** The ids of the grants of the filter's server (every grant ever made for its resource). */
async function serverGrants(db: AuditReader, filter: Omit<AuditFilter, "limit">): Promise<string[]> {
  if (!filter.server) return [];
  return (await db.grant.findMany({ where: { resource: filter.server.resource }, select: { id: true } })).map((g) => g.id);
}

export function auditRecord(row: AuditEvent): AuditRecord {
  return {
    id: row.id,
    at: row.at,
    type: row.type,
    subject: row.subject,
    clientId: row.clientId,
    grantId: row.grantId,
    ip: row.ip,
    detail: parseDetail(row.detail),
  };
}

/** The newest `filter.limit` events matching the filter, oldest first. */
export async function readAuditLog(db: AuditReader, filter: AuditFilter): Promise<AuditRecord[]> {
  const rows = await db.auditEvent.findMany({
    where: whereOf(filter, await serverGrants(db, filter)),
    orderBy: [{ at: "desc" }, { id: "desc" }],
    take: filter.limit,
  });
  return rows.reverse().map(auditRecord);
}

/** The oldest `filter.limit` events at or after `filter.since`, oldest first: the next page of a tail. */
export async function readAuditLogForward(db: AuditReader, filter: AuditFilter): Promise<AuditRecord[]> {
  const rows = await db.auditEvent.findMany({
    where: whereOf(filter, await serverGrants(db, filter)),
    orderBy: [{ at: "asc" }, { id: "asc" }],
    take: filter.limit,
  });
  return rows.map(auditRecord);
}

/**
 * One event as a JSON object for whatever reads the stream (a SIEM, a log collector): the fields
 * of the `audit --json` listing plus `stream: "audit"`, which tells these lines apart from log lines
 * on a shared stdout. Recorded events hold no token, code or secret; detail keys that name one are
 * masked all the same, as the log masks them.
 */
export function auditJson(record: AuditRecord): Record<string, unknown> {
  return {
    stream: "audit",
    id: record.id,
    at: record.at.toISOString(),
    type: record.type,
    subject: record.subject,
    clientId: record.clientId,
    grantId: record.grantId,
    ip: record.ip,
    detail: censorSensitive(record.detail),
  };
}
