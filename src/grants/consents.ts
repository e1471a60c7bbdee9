// Remembered consents: a server-side record that this browser approved this client, with this
// redirect URI and these scopes. Only the same request lets the consent page be skipped: the same
// scopes, or with some replaced by narrower ones they imply (SCOPE_IMPLIES).
import { randomUUID } from "node:crypto";
import type { Db } from "../store/db.ts";
import { dateOf, systemClock, type Clock } from "../lib/clock.ts";
import { covers, scopeList, withImplied, type ScopeImplications } from "./scope.ts";

export const CONSENT_TTL_SECONDS = 30 * 86400;

export interface ConsentKey {
  readonly browserSessionId: string;
  readonly clientId: string;
  readonly redirectUri: string;
  readonly scope: string;
  /** The MCP server (its resource URI): consent is per client and server. */
  readonly resource: string;
}

/**
 * Whether approving `approved` stands for a request of `asked`: everything asked was approved or is
 * implied by what was, and every approved scope is asked or implies one that is — the same
 * request, or one with some scopes replaced by narrower ones (docs:write approved covers
 * docs:read). A request that merely leaves a scope out (offline_access) is a different request,
 * shown again, as before hierarchies existed.
 */
export function approvalCovers(approved: readonly string[], asked: readonly string[], implies: ScopeImplications = {}): boolean {
  const wanted = new Set(withImplied(asked, implies));
  if (!covers(approved, [...wanted], implies)) return false;
  return approved.every((s) => wanted.has(s) || (implies[s] ?? []).some((narrower) => wanted.has(narrower)));
}

export class Consents {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock = systemClock,
    /** Each server's scope implications: an approval of docs:write covers a request for docs:read. */
    private readonly impliesAt: (resource: string) => ScopeImplications = () => ({}),
  ) {}

  async remember(key: ConsentKey): Promise<void> {
    const expiresAt = new Date(this.clock.now() + CONSENT_TTL_SECONDS * 1000);
    await this.db.consent.upsert({
      where: { browserSessionId_clientId_redirectUri_scope_resource: key },
      create: { id: randomUUID(), ...key, expiresAt },
      update: { expiresAt },
    });
  }

  /** Whether a live approval of this browser, client, redirect URI and server covers `key.scope` (approvalCovers). */
  async given(key: ConsentKey): Promise<boolean> {
    const { browserSessionId, clientId, redirectUri, resource } = key;
    const approvals = await this.db.consent.findMany({
      where: { browserSessionId, clientId, redirectUri, resource, expiresAt: { gt: dateOf(this.clock) } },
      select: { scope: true },
    });
    const asked = scopeList(key.scope);
    const implies = this.impliesAt(resource);
    return approvals.some((approval) => approvalCovers(scopeList(approval.scope), asked, implies));
  }

  /**
   * Whether this browser approved this client at all (any redirect URI, any scope) and the approval
   * still lives: what makes /authorize trust the client enough to send errors to its redirect URI.
   */
  async approvedBefore(browserSessionId: string, clientId: string): Promise<boolean> {
    const row = await this.db.consent.findFirst({ where: { browserSessionId, clientId, expiresAt: { gt: dateOf(this.clock) } }, select: { id: true } });
    return row !== null;
  }
}
