// Remembered consents: a server-side record that this browser approved this client, with this
// redirect URI and these scopes. Only an exact match lets the consent page be skipped.
import { randomUUID } from "node:crypto";
import type { Db } from "../store/db.ts";
import { dateOf, systemClock, type Clock } from "./clock.ts";

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
  ) {}

  async remember(key: ConsentKey): Promise<void> {
    const expiresAt = new Date(this.clock.now() + CONSENT_TTL_SECONDS * 1000);
    await this.db.consent.upsert({
      where: { browserSessionId_clientId_redirectUri_scope: key },
      create: { id: randomUUID(), ...key, expiresAt },
      update: { expiresAt },
    });
  }

  async given(key: ConsentKey): Promise<boolean> {
    const row = await this.db.consent.findUnique({ where: { browserSessionId_clientId_redirectUri_scope: key } });
    return Boolean(row && row.expiresAt > dateOf(this.clock));
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
