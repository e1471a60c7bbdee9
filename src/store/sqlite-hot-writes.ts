// The hot store's writes on SQLite, by name, each in two halves. `params`, when the write is asked
// for (sqlite-writer.ts), turns its arguments into its statements' parameters; `run` runs the
// statements inside its group transaction, on the event loop's connection or, when another process
// holds the lock, on the writer thread (sqlite-writer-thread.ts). What crosses the thread boundary
// by structured clone is then arrays of strings, numbers and nulls: a refresh rotation's rows as
// objects with Dates cost 2.4 µs to post and 4.9 µs to receive, as parameter arrays 1.4 and 1.9 µs
// (measured with a MessageChannel).
import type { CodeExchange, GrantUse, McpSession, RefreshRotation, UpstreamCheck } from "./hot-store.ts";
import { tables } from "./hot-rows.ts";
import { dateText } from "./date-text.ts";
import { encode, type HotConnection } from "./sqlite-hot-sql.ts";

const { accessToken, refreshToken, auditEvent } = tables;

/** One statement's parameters, as they cross to the writer thread. */
type Params = readonly unknown[];

interface HotWrite<Args extends readonly unknown[], Encoded, Result> {
  readonly params: (...args: Args) => Encoded;
  readonly run: (c: HotConnection, encoded: Encoded) => Result;
}

/** A write's two halves, typed together. */
const write = <Args extends readonly unknown[], Encoded, Result>(params: (...args: Args) => Encoded, run: (c: HotConnection, encoded: Encoded) => Result) =>
  ({ params, run }) satisfies HotWrite<Args, Encoded, Result>;

const useGrantParams = (use: GrantUse): Params => [dateText(use.lastUsedAt), dateText(use.idleExpiresAt), use.grantId];

export const hotWrites = {
  touchClient: write(
    (id: string, at: Date): Params => [dateText(at), id],
    (c, p): void => {
      c.stmt("touchClient").run(...p);
    },
  ),

  rotateRefreshToken: write(
    (r: RefreshRotation): readonly [Params, Params, Params, Params, Params] => {
      const consumedAt = dateText(r.consumedAt);
      return [
        [consumedAt, dateText(r.graceUntil), consumedAt, r.issued.refresh.id, r.refreshTokenId],
        encode(refreshToken, r.issued.refresh),
        encode(accessToken, r.issued.access),
        useGrantParams(r.use),
        encode(auditEvent, r.audit),
      ];
    },
    (c, [claim, refresh, access, use, audit]): boolean => {
      if (c.stmt("claimRefreshToken").run(...claim).changes !== 1) return false;
      c.stmt("insertRefreshToken").run(...refresh);
      c.stmt("insertAccessToken").run(...access);
      c.stmt("useGrant").run(...use);
      c.stmt("insertAuditEvent").run(...audit);
      return true;
    },
  ),

  exchangeCode: write(
    (e: CodeExchange): readonly [Params, Params, Params | null, Params, Params] => [
      [dateText(e.consumedAt), e.codeId],
      useGrantParams(e.use),
      e.issued.refresh ? encode(refreshToken, e.issued.refresh) : null,
      encode(accessToken, e.issued.access),
      encode(auditEvent, e.audit),
    ],
    (c, [claim, use, refresh, access, audit]): boolean => {
      if (c.stmt("claimCode").run(...claim).changes !== 1) return false;
      c.stmt("useGrant").run(...use);
      if (refresh) c.stmt("insertRefreshToken").run(...refresh);
      c.stmt("insertAccessToken").run(...access);
      c.stmt("insertAuditEvent").run(...audit);
      return true;
    },
  ),

  recordGrantUse: write(
    (use: GrantUse): Params => {
      const at = dateText(use.lastUsedAt);
      return [at, dateText(use.idleExpiresAt), use.grantId, at];
    },
    (c, p): void => {
      c.stmt("useLiveGrant").run(...p);
    },
  ),

  recordUpstreamCheck: write(
    (id: string, check: UpstreamCheck, updatedAt: Date): { readonly withFacts: boolean; readonly params: Params } => {
      const common = [dateText(check.lastCheckedAt), check.accessExpiresAt ? dateText(check.accessExpiresAt) : null, dateText(updatedAt)];
      return check.facts
        ? { withFacts: true, params: [...common, check.facts.login, check.facts.email, check.facts.profile, check.facts.facts, id] }
        : { withFacts: false, params: [...common, id] };
    },
    (c, { withFacts, params }): void => {
      c.stmt(withFacts ? "recordCheckWithFacts" : "recordCheck").run(...params);
    },
  ),

  claimAssertion: write(
    (key: string, expiresAt: Date, now: Date): Params => [key, dateText(expiresAt), dateText(now)],
    (c, p): boolean => c.stmt("claimAssertion").run(...p).changes === 1,
  ),

  claimMcpSession: write(
    (session: McpSession): Params => [session.sessionHash, session.owner, dateText(session.createdAt)],
    (c, p): string => {
      c.stmt("claimMcpSession").run(...p);
      return c.row("mcpSessionOwner", p[0])![0] as string;
    },
  ),

  releaseMcpSession: write(
    (sessionHash: string): Params => [sessionHash],
    (c, p): void => {
      c.stmt("releaseMcpSession").run(...p);
    },
  ),
};

export type HotWrites = typeof hotWrites;
export type HotWriteName = keyof HotWrites;
/** A write's arguments, as the event-loop thread passes them. */
export type HotWriteArgs<N extends HotWriteName> = Parameters<HotWrites[N]["params"]>;
export type HotWriteResult<N extends HotWriteName> = ReturnType<HotWrites[N]["run"]>;

/** One write as it is queued (and crosses to the writer thread): its name and its statements' parameters. */
export interface HotWriteRequest {
  readonly name: HotWriteName;
  readonly params: unknown;
}

/** The request for a write, encoded on the calling thread; throws when an argument cannot be encoded (an invalid Date). */
export function hotWriteRequest<N extends HotWriteName>(name: N, ...args: HotWriteArgs<N>): HotWriteRequest {
  const params = hotWrites[name].params as (...a: HotWriteArgs<N>) => unknown;
  return { name, params: params(...args) };
}

/** Runs a request on the writer's connection. */
export function runHotWrite(c: HotConnection, request: HotWriteRequest): unknown {
  const run = hotWrites[request.name].run as (c: HotConnection, encoded: unknown) => unknown;
  return run(c, request.params);
}
