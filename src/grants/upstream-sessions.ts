// The secure mapping to upstream sessions: upstream tokens live here, encrypted, and are checked
// (and refreshed when they expire) before any broker token standing on them is honoured.
import { randomUUID } from "node:crypto";
import type { GrantsContext } from "./context.ts";
import type { GrantLifecycle } from "./lifecycle.ts";
import { CredentialRejected, UpstreamUnavailable } from "./errors.ts";
import { audit } from "./audit.ts";
import { SingleFlight } from "../lib/single-flight.ts";
import { UpstreamError, type TokensForIdentity, type UpstreamIdentity, type UpstreamTokens } from "../upstream/provider.ts";
import type { Tx } from "../store/db.ts";
import type { UpstreamCheck, UpstreamSession, UpstreamSessionState } from "../store/hot-store.ts";
import { DecryptionError, storedKeyId } from "../store/secrets.ts";
import { dateOf } from "../lib/clock.ts";
import type { IdentityFacts } from "./policy.ts";
import { factsColumn, factsOf, factsUnknown, storedFacts, storedGroups } from "./stored-facts.ts";
import { readsFacts } from "./server-access.ts";
import { endGrantsServersRefuse } from "./server-access-recheck.ts";

export interface CheckedSession {
  readonly id: string;
  readonly subject: string;
  readonly login: string | null;
  readonly lastCheckedAt: Date;
  /** What the access rules read, as of the last check that read them (or the sign-in). */
  readonly facts: IdentityFacts;
}

/** What a check stores of the identity it read: the columns that describe the user. */
type StoredIdentity = NonNullable<UpstreamCheck["facts"]>;

function storedIdentity(identity: UpstreamIdentity): StoredIdentity {
  return { login: identity.login, email: identity.email ?? null, profile: JSON.stringify(identity.profile), facts: factsColumn(identity) };
}

/** Whether a read brought the session's whole row (access-token validation's does) or its state only (the refresh grant's). */
function isWholeRow(read: UpstreamSessionState | UpstreamSession): read is UpstreamSession {
  return "accessTokenEnc" in read;
}

/** Whether the row already holds what a check read (then only the time of the check is written). */
function holds(row: UpstreamSession, stored: StoredIdentity): boolean {
  return stored.login === row.login && stored.email === row.email && stored.profile === row.profile && stored.facts === row.facts;
}

/**
 * How stale the stored time of the last good check may get when nothing else changed. Only with
 * UPSTREAM_RECHECK_SECONDS=0 (a check on every use) do checks come faster: the stored time decides
 * nothing then, and writing it on every request cost more CPU than the check itself (a COMMIT each).
 */
const CHECK_RECORD_INTERVAL_MS = 1000;

/** Whether the stored row already says what this check found, as of less than CHECK_RECORD_INTERVAL_MS ago. */
function recordedRecently(row: UpstreamSession, check: UpstreamCheck): boolean {
  const age = check.lastCheckedAt.getTime() - row.lastCheckedAt.getTime();
  if (age < 0 || age >= CHECK_RECORD_INTERVAL_MS) return false;
  if ((check.accessExpiresAt?.getTime() ?? null) !== (row.accessExpiresAt?.getTime() ?? null)) return false;
  return !check.facts || holds(row, check.facts);
}

/** What a client is told when the stored sign-in behind its token cannot be decrypted any more. */
const UNREADABLE = "the broker can no longer read the upstream sign-in behind this token (its encryption key was changed); authorize again";

/** Upstream sessions read per query when looking for ones no configured key can read. */
const SCAN_PAGE = 500;

/** The upstream sessions ended because no configured key reads their tokens, and the grants on them. */
export interface UnreadableEnded {
  readonly sessions: number;
  readonly grants: number;
  /** The key ids those tokens were written under (as their headers say). */
  readonly keyIds: readonly string[];
}

/** Told of every call to the identity provider for a session, and of policy refusals (metrics). */
export interface UpstreamObserver {
  upstreamCall(call: "check" | "identity" | "refresh", result: "ok" | "rejected" | "unavailable", seconds: number): void;
  policyDenied(): void;
}

export class UpstreamSessions {
  private readonly checks = new SingleFlight<CheckedSession>();
  readonly stats = { checks: 0, refreshes: 0 };
  /** Set by the broker when it keeps metrics. */
  observer: UpstreamObserver | undefined;

  constructor(
    private readonly ctx: GrantsContext,
    private readonly lifecycle: GrantLifecycle,
  ) {}

  /** Stores a new upstream session (tokens encrypted) inside the caller's transaction. */
  async create(tx: Tx, identity: UpstreamIdentity, tokens: UpstreamTokens, now: Date): Promise<string> {
    const id = randomUUID();
    await tx.upstreamSession.create({
      data: {
        id,
        provider: this.ctx.provider.kind,
        subject: identity.subject,
        login: identity.login,
        email: identity.email ?? null,
        profile: JSON.stringify(identity.profile),
        facts: factsColumn(identity),
        ...(await this.encryptTokens(tokens)),
        lastCheckedAt: now,
        status: "active",
      },
    });
    return id;
  }

  async tokensOf(sessionId: string): Promise<UpstreamTokens | null> {
    const row = await this.ctx.hot.upstreamSessionById(sessionId);
    return row ? this.readOrEnd(sessionId, row.subject, () => this.decryptTokens(row)) : null;
  }

  /**
   * Ends every active upstream session whose stored tokens none of the configured keys can read
   * (SECRET_KEY changed without SECRET_KEY_PREVIOUS), and the grants on them: their users sign in
   * again, instead of each use failing. Nothing is decrypted: the key id is in every value's
   * header, and the query keeps only rows whose values do not begin with a configured key's
   * header, so a start on a large database reads the few rows that need it.
   */
  async endUnreadable(): Promise<UnreadableEnded> {
    const { secrets } = this.ctx;
    const prefixes = secrets.storedPrefixes;
    const keyIds = new Set<string>();
    let sessions = 0;
    let grants = 0;
    let after = "";
    for (;;) {
      const page = await this.ctx.db.upstreamSession.findMany({
        where: {
          status: "active",
          id: { gt: after },
          OR: [
            { NOT: { OR: prefixes.map((p) => ({ accessTokenEnc: { startsWith: p } })) } },
            { refreshTokenEnc: { not: null }, NOT: { OR: prefixes.map((p) => ({ refreshTokenEnc: { startsWith: p } })) } },
            { idTokenEnc: { not: null }, NOT: { OR: prefixes.map((p) => ({ idTokenEnc: { startsWith: p } })) } },
          ],
        },
        select: { id: true, subject: true, accessTokenEnc: true, refreshTokenEnc: true, idTokenEnc: true },
        orderBy: { id: "asc" },
        take: SCAN_PAGE,
      });
      if (page.length === 0) break;
      after = page.at(-1)!.id;
      const unreadable = page.flatMap((row) => {
        const stored = [row.accessTokenEnc, row.refreshTokenEnc, row.idTokenEnc].filter((v): v is string => v !== null);
        const unread = stored.find((v) => !secrets.canRead(v));
        return unread === undefined ? [] : [{ ...row, keyId: storedKeyId(unread) ?? null }];
      });
      if (unreadable.length === 0) continue;
      for (const row of unreadable) {
        if (row.keyId) keyIds.add(row.keyId);
        await audit(this.ctx.db, {
          type: "upstream.unreadable",
          subject: row.subject,
          detail: { upstreamSession: row.id, keyId: row.keyId, reason: "written under a key that is neither SECRET_KEY nor in SECRET_KEY_PREVIOUS" },
        });
      }
      grants += (
        await this.lifecycle.revokeUpstreamSessions(
          unreadable.map((r) => r.id),
          "upstream_unreadable",
        )
      ).length;
      sessions += unreadable.length;
    }
    return { sessions, grants, keyIds: [...keyIds] };
  }

  /**
   * Runs a decryption of this session's tokens; when it fails (written under a key this process
   * does not have, or changed in the database), the session and its grants end here: a client
   * hears 401 / invalid_grant and signs in again, instead of a 500 on every retry.
   */
  private async readOrEnd<T>(sessionId: string, subject: string, read: () => Promise<T>): Promise<T> {
    try {
      return await read();
    } catch (err) {
      if (!(err instanceof DecryptionError)) throw err;
      this.ctx.logger.warn({ upstreamSession: sessionId, subject, err: err.message }, "stored upstream tokens cannot be read: the grants on them are ended");
      await audit(this.ctx.db, { type: "upstream.unreadable", subject, detail: { upstreamSession: sessionId, reason: err.message } });
      await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_unreadable");
      throw new CredentialRejected(UNREADABLE);
    }
  }

  /**
   * Makes sure the upstream session was found good within UPSTREAM_RECHECK_SECONDS (0: now).
   * Concurrent callers for one session share one upstream call. Throws CredentialRejected when the
   * upstream session is dead (its grants are then revoked) and UpstreamUnavailable when the
   * upstream cannot answer (fail closed). `read`: the session's row, or its state, when the
   * caller's own query already brought it (the refresh grant's, access-token validation's), saving
   * a read while no re-check is due.
   */
  ensureChecked(sessionId: string, read?: UpstreamSessionState | UpstreamSession): Promise<CheckedSession> {
    return this.checks.run(sessionId, () => this.check(sessionId, read));
  }

  private async check(sessionId: string, read: UpstreamSessionState | UpstreamSession | undefined): Promise<CheckedSession> {
    const state = read ?? (await this.ctx.hot.upstreamSessionById(sessionId));
    if (state?.status !== "active") throw new CredentialRejected("the upstream login behind this token has ended");
    const now = this.ctx.clock.now();
    const window = this.ctx.config.upstreamRecheckSeconds * 1000;
    const view = { id: state.id, subject: state.subject, login: state.login };
    const needsFacts = readsFacts(this.ctx.policy, this.ctx.config.catalogue);
    // A session stored before the facts were kept has none to decide by: it is checked now (the
    // facts read again) rather than refused by every rule that needs them until its window ends.
    const fresh = window > 0 && now - state.lastCheckedAt.getTime() < window;
    if (fresh && !(needsFacts && factsUnknown(state))) return { ...view, lastCheckedAt: state.lastCheckedAt, facts: storedFacts(state) };

    // A check is due: it needs the whole row (the upstream tokens, their expiry, the stored identity).
    const row = isWholeRow(state) ? state : await this.ctx.hot.upstreamSessionById(sessionId);
    if (row?.status !== "active") throw new CredentialRejected("the upstream login behind this token has ended");

    // Only the access token is decrypted: a check needs nothing else (whether a refresh token
    // is held is read from its column); a refresh or a revocation decrypts the rest.
    const accessToken = await this.readOrEnd(sessionId, row.subject, () => this.ctx.secrets.decrypt(row.accessTokenEnc));
    const checked = { accessToken, scope: row.scope ?? undefined };
    let status: "active" | "invalid" | "expired";
    let reason = "";
    let accessExpiresAt = row.accessExpiresAt ?? undefined;
    if (accessExpiresAt && accessExpiresAt.getTime() <= now) status = "expired";
    else {
      this.stats.checks++;
      const result = await this.callUpstream("check", () =>
        this.ctx.provider.check({ accessToken: checked.accessToken, accessExpiresAt, refreshable: row.refreshTokenEnc !== null }),
      );
      status = result.status;
      if (result.status === "invalid") reason = result.reason;
      if (result.status === "active" && result.accessExpiresAt) accessExpiresAt = result.accessExpiresAt;
    }

    if (status === "expired") return this.refresh(sessionId, row, await this.readOrEnd(sessionId, row.subject, () => this.decryptTokens(row)), view);
    if (status === "invalid") {
      await audit(this.ctx.db, { type: "upstream.invalid", subject: row.subject, detail: { upstreamSession: sessionId, reason } });
      await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_invalid");
      throw new CredentialRejected("the upstream identity provider no longer accepts this login; authorize again");
    }
    const admitted = await this.admitAgain(sessionId, row, checked, () => this.decryptTokens(row), needsFacts);
    const checkedAt = dateOf(this.ctx.clock);
    const record = { lastCheckedAt: checkedAt, accessExpiresAt: accessExpiresAt ?? null, facts: admitted.changed };
    if (!recordedRecently(row, record)) await this.ctx.hot.recordUpstreamCheck(sessionId, record);
    return { ...view, login: admitted.facts.login ?? view.login, lastCheckedAt: checkedAt, facts: admitted.facts };
  }

  /**
   * Reads the facts the access rules need again (org and team membership, groups, verified
   * e-mails) and applies the policy as configured now: a user who left the org, or whom a changed
   * policy no longer admits, loses every grant on this session here; a grant whose server's own
   * rules no longer admit the user (or whose server is gone) ends alone. Returns the facts, and
   * what to store when they changed. `allTokens` gives every token of the session, for revoking
   * them upstream. Without `needsFacts` (no rule reads more than the subject) nothing is asked.
   */
  private async admitAgain(
    sessionId: string,
    row: UpstreamSession,
    tokens: TokensForIdentity,
    allTokens: () => Promise<UpstreamTokens>,
    needsFacts: boolean,
  ): Promise<{ readonly facts: IdentityFacts; readonly changed: UpstreamCheck["facts"] }> {
    if (!needsFacts) return { facts: storedFacts(row), changed: undefined };
    let identity: UpstreamIdentity;
    try {
      identity = await this.callUpstream("identity", () => this.ctx.provider.fetchIdentity(tokens));
    } catch (err) {
      if (err instanceof UpstreamError && err.kind === "invalid_grant") {
        await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_invalid");
        throw new CredentialRejected("the upstream identity provider no longer accepts this login; authorize again");
      }
      if (err instanceof UpstreamError) throw new UpstreamUnavailable("the upstream identity provider gave an answer the broker cannot use; retry shortly");
      throw err;
    }
    // A subject never changes under one upstream session; an answer about someone else is refused.
    if (identity.subject !== row.subject) throw new UpstreamUnavailable("the upstream identity provider answered for another user; retry shortly");
    const read = { ...identity, groups: identity.groups ?? storedGroups(row) };
    const decision = this.ctx.policy.decide(read);
    if (!decision.admitted) {
      this.ctx.logger.warn({ subject: row.subject, login: identity.login }, "access policy no longer admits this user: grants revoked");
      await audit(this.ctx.db, {
        type: "access.policy_denied",
        subject: row.subject,
        detail: { upstreamSession: sessionId, reason: "policy_denied", login: identity.login },
      });
      // Nothing may stand on this upstream token any more: give it back (best effort).
      await (async () => this.ctx.provider.revoke(await allTokens()))().catch((err: unknown) => {
        this.ctx.logger.warn(
          { err: err instanceof Error ? err.message : String(err) },
          "could not revoke the upstream token of a user the policy no longer admits",
        );
      });
      this.observer?.policyDenied();
      await this.lifecycle.revokeUpstreamSession(sessionId, "policy_denied");
      throw new CredentialRejected("the access policy of this service no longer admits this account");
    }
    const facts = factsOf(read);
    await endGrantsServersRefuse(this.ctx, this.lifecycle, { id: sessionId, subject: row.subject }, facts, () => this.observer?.policyDenied());
    const stored = storedIdentity(read);
    return { facts, changed: holds(row, stored) ? undefined : stored };
  }

  private async refresh(
    sessionId: string,
    row: UpstreamSession,
    tokens: UpstreamTokens,
    view: Omit<CheckedSession, "lastCheckedAt" | "facts">,
  ): Promise<CheckedSession> {
    if (!this.ctx.provider.canRefresh(tokens)) {
      await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_refresh_failed");
      throw new CredentialRejected("the upstream login expired and cannot be renewed; authorize again");
    }
    let fresh: UpstreamTokens;
    this.stats.refreshes++;
    try {
      fresh = await this.callUpstream("refresh", () => this.ctx.provider.refresh(tokens));
    } catch (err) {
      if (err instanceof UpstreamUnavailable) throw err;
      await this.lifecycle.revokeUpstreamSession(sessionId, "upstream_refresh_failed");
      throw new CredentialRejected("the upstream identity provider refused to renew this login; authorize again");
    }
    const renewed = { ...fresh, refreshToken: fresh.refreshToken ?? tokens.refreshToken };
    // The rotated upstream refresh token is stored before anything else can fail: losing it would
    // orphan the session.
    await this.ctx.db.upstreamSession.update({ where: { id: sessionId }, data: await this.encryptTokens(renewed) });
    const admitted = await this.admitAgain(sessionId, row, renewed, async () => renewed, readsFacts(this.ctx.policy, this.ctx.config.catalogue));
    const checkedAt = dateOf(this.ctx.clock);
    await this.ctx.db.upstreamSession.update({ where: { id: sessionId }, data: { lastCheckedAt: checkedAt, ...admitted.changed } });
    await audit(this.ctx.db, { type: "upstream.refreshed", subject: view.subject, detail: { upstreamSession: sessionId } });
    return { ...view, login: admitted.facts.login ?? view.login, lastCheckedAt: checkedAt, facts: admitted.facts };
  }

  /** Runs an upstream call; network failures, timeouts and 5xx become UpstreamUnavailable. */
  private async callUpstream<T>(kind: "check" | "identity" | "refresh", call: () => Promise<T>): Promise<T> {
    const started = performance.now();
    const observe = (result: "ok" | "rejected" | "unavailable") => this.observer?.upstreamCall(kind, result, (performance.now() - started) / 1000);
    try {
      const answer = await call();
      observe("ok");
      return answer;
    } catch (err) {
      const unavailable = !(err instanceof UpstreamError) || err.kind === "unavailable" || err.kind === "misconfigured";
      observe(unavailable ? "unavailable" : "rejected");
      if (!unavailable) throw err;
      const message = err instanceof Error ? err.message : String(err);
      this.ctx.logger.warn({ err: message }, "upstream identity provider unavailable");
      throw new UpstreamUnavailable("the upstream identity provider is not reachable right now; retry shortly");
    }
  }

  private async encryptTokens(tokens: UpstreamTokens) {
    return {
      accessTokenEnc: await this.ctx.secrets.encrypt(tokens.accessToken),
      refreshTokenEnc: await this.ctx.secrets.encryptOptional(tokens.refreshToken),
      idTokenEnc: await this.ctx.secrets.encryptOptional(tokens.idToken),
      scope: tokens.scope ?? null,
      accessExpiresAt: tokens.accessExpiresAt ?? null,
    };
  }

  private async decryptTokens(
    row: Pick<UpstreamSession, "accessTokenEnc" | "refreshTokenEnc" | "idTokenEnc" | "scope" | "accessExpiresAt">,
  ): Promise<UpstreamTokens> {
    return {
      accessToken: await this.ctx.secrets.decrypt(row.accessTokenEnc),
      refreshToken: (await this.ctx.secrets.decryptOptional(row.refreshTokenEnc)) ?? undefined,
      idToken: (await this.ctx.secrets.decryptOptional(row.idTokenEnc)) ?? undefined,
      scope: row.scope ?? undefined,
      accessExpiresAt: row.accessExpiresAt ?? undefined,
    };
  }
}
