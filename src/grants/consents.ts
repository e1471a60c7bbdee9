// Remembered consents: a server-side record that this browser approved this client, with this
// redirect URI and these scopes. The consent page is skipped only for a request that asks for no
// more than one approval gave (with what its scopes imply, SCOPE_IMPLIES).
import { randomUUID } from "node:crypto";
import type { Db } from "../store/db.ts";
import { dateOf, systemClock, type Clock } from "./clock.ts";
import { covers, scopeList, type ScopeImplications } from "./scope.ts";

export const CONSENT_TTL_SECONDS = 30 * 86400;

export interface ConsentKey {
  readonly browserSessionId: string;
  readonly clientId: string;
  readonly redirectUri: string;
  readonly scope: string;
}

export class Consents {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock = systemClock,
    /** SCOPE_IMPLIES: an approval of docs:write covers a request for docs:read. */
    private readonly implies: ScopeImplications = {},
  ) {}

  async remember(key: ConsentKey): Promise<void> {
    const expiresAt = new Date(this.clock.now() + CONSENT_TTL_SECONDS * 1000);
    await this.db.consent.upsert({
      where: { browserSessionId_clientId_redirectUri_scope: key },
      create: { id: randomUUID(), ...key, expiresAt },
      update: { expiresAt },
    });
  }

  /**
   * Whether a live approval of this browser, client and redirect URI covers `key.scope`: every
   * scope asked was approved, or is implied by one that was. Never more than was approved:
   * offline_access, or a scope no approval implies, shows the page again.
   */
  async given(key: ConsentKey): Promise<boolean> {
    const { browserSessionId, clientId, redirectUri } = key;
    const approvals = await this.db.consent.findMany({
      where: { browserSessionId, clientId, redirectUri, expiresAt: { gt: dateOf(this.clock) } },
      select: { scope: true },
    });
    const asked = scopeList(key.scope);
    return approvals.some((approval) => covers(scopeList(approval.scope), asked, this.implies));
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
