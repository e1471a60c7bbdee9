// Rows the hot store writes, as the store tests build them: a refresh token, an access token and an
// audit event of client "client-1", at a fixed instant (T0) so that dates read back compare equal.
import { randomUUID } from "node:crypto";
import type { AccessToken, AuditEvent, RefreshToken } from "../../src/store/hot-store.ts";

export const T0 = new Date("2031-05-06T07:08:09.123Z");
export const later = (seconds: number) => new Date(T0.getTime() + seconds * 1000);

export function refreshRow(grantId: string, fields: Partial<RefreshToken> = {}): RefreshToken {
  return {
    id: randomUUID(),
    tokenHash: randomUUID(),
    prefix: "mab_rt_x",
    grantId,
    clientId: "client-1",
    resource: "https://rs.example/mcp",
    scope: "mcp offline_access",
    parentId: null,
    successorId: null,
    createdAt: T0,
    expiresAt: later(3600),
    consumedAt: null,
    graceUntil: null,
    firstUsedAt: null,
    revokedAt: null,
    ...fields,
  };
}

export function accessRow(grantId: string, refreshTokenId: string | null, fields: Partial<AccessToken> = {}): AccessToken {
  return {
    id: randomUUID(),
    tokenHash: randomUUID(),
    prefix: "mab_at_x",
    grantId,
    clientId: "client-1",
    resource: "https://rs.example/mcp",
    scope: "mcp",
    refreshTokenId,
    createdAt: T0,
    expiresAt: later(600),
    revokedAt: null,
    ...fields,
  };
}

export function auditRow(type: string, grantId: string): AuditEvent {
  return { id: randomUUID(), at: T0, type, clientId: "client-1", grantId, subject: "github:1", ip: null, detail: '{"k":1}', deliveredAt: null };
}

/** A live grant of "client-1" (Prisma's create data), idle for an hour, at most a day. */
export function grantRow(fields: { resource?: string; revokedAt?: Date | null } = {}) {
  return {
    id: randomUUID(),
    clientId: "client-1",
    kind: "authorization_code",
    resource: "https://rs.example/mcp",
    scope: "mcp",
    lastUsedAt: T0,
    idleExpiresAt: later(3600),
    absoluteExpiresAt: later(86400),
    ...fields,
  };
}
