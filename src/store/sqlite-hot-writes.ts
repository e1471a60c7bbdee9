// The hot store's writes on SQLite, by name: the writer thread runs them (sqlite-writer-thread.ts)
// inside its group transactions; the event-loop thread names one and sends its arguments
// (sqlite-writer.ts). Arguments and results cross the thread boundary by structured clone: plain
// rows, strings and Dates only.
import type { CodeExchange, GrantUse, McpSession, RefreshRotation, UpstreamCheck } from "./hot-store.ts";
import { tables } from "./hot-rows.ts";
import { encode, sqliteDate, type HotConnection } from "./sqlite-hot-sql.ts";

const { accessToken, refreshToken, auditEvent } = tables;

const useGrant = (c: HotConnection, use: GrantUse) => c.stmt("useGrant").run(sqliteDate(use.lastUsedAt), sqliteDate(use.idleExpiresAt), use.grantId);

export const hotWrites = {
  touchClient(c: HotConnection, id: string, at: Date): void {
    c.stmt("touchClient").run(sqliteDate(at), id);
  },

  rotateRefreshToken(c: HotConnection, r: RefreshRotation): boolean {
    const consumedAt = sqliteDate(r.consumedAt);
    const claim = c.stmt("claimRefreshToken").run(consumedAt, sqliteDate(r.graceUntil), consumedAt, r.issued.refresh.id, r.refreshTokenId);
    if (claim.changes !== 1) return false;
    c.stmt("insertRefreshToken").run(...encode(refreshToken, r.issued.refresh));
    c.stmt("insertAccessToken").run(...encode(accessToken, r.issued.access));
    useGrant(c, r.use);
    c.stmt("insertAuditEvent").run(...encode(auditEvent, r.audit));
    return true;
  },

  exchangeCode(c: HotConnection, e: CodeExchange): boolean {
    if (c.stmt("claimCode").run(sqliteDate(e.consumedAt), e.codeId).changes !== 1) return false;
    useGrant(c, e.use);
    if (e.issued.refresh) c.stmt("insertRefreshToken").run(...encode(refreshToken, e.issued.refresh));
    c.stmt("insertAccessToken").run(...encode(accessToken, e.issued.access));
    c.stmt("insertAuditEvent").run(...encode(auditEvent, e.audit));
    return true;
  },

  recordGrantUse(c: HotConnection, use: GrantUse): void {
    const at = sqliteDate(use.lastUsedAt);
    c.stmt("useLiveGrant").run(at, sqliteDate(use.idleExpiresAt), use.grantId, at);
  },

  recordUpstreamCheck(c: HotConnection, id: string, check: UpstreamCheck, updatedAt: Date): void {
    const common = [sqliteDate(check.lastCheckedAt), check.accessExpiresAt ? sqliteDate(check.accessExpiresAt) : null, sqliteDate(updatedAt)];
    if (check.facts) c.stmt("recordCheckWithFacts").run(...common, check.facts.login, check.facts.email, check.facts.profile, check.facts.facts, id);
    else c.stmt("recordCheck").run(...common, id);
  },

  claimAssertion(c: HotConnection, key: string, expiresAt: Date, now: Date): boolean {
    return c.stmt("claimAssertion").run(key, sqliteDate(expiresAt), sqliteDate(now)).changes === 1;
  },

  claimMcpSession(c: HotConnection, session: McpSession): string {
    c.stmt("claimMcpSession").run(session.sessionHash, session.owner, sqliteDate(session.createdAt));
    return c.row("mcpSessionOwner", session.sessionHash)![0] as string;
  },

  releaseMcpSession(c: HotConnection, sessionHash: string): void {
    c.stmt("releaseMcpSession").run(sessionHash);
  },
};

export type HotWrites = typeof hotWrites;
export type HotWriteName = keyof HotWrites;
/** A write's arguments after the connection. */
export type HotWriteArgs<N extends HotWriteName> = HotWrites[N] extends (c: HotConnection, ...args: infer A) => unknown ? A : never;
export type HotWriteResult<N extends HotWriteName> = ReturnType<HotWrites[N]>;

/** One write as it crosses to the writer thread. */
export interface HotWriteRequest {
  readonly name: HotWriteName;
  readonly args: readonly unknown[];
}

/** Runs a request on the writer's connection. */
export function runHotWrite(c: HotConnection, request: HotWriteRequest): unknown {
  const write = hotWrites[request.name] as (c: HotConnection, ...args: readonly unknown[]) => unknown;
  return write(c, ...request.args);
}
