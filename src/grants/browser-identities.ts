// Who signed in at the upstream IdP in a browser, last: the consent page names them ("signed in as
// octocat") and the connected-apps page (/account) lists their grants. Kept server-side under the
// browser session id; the cookie holds nothing but that id.
import type { Db } from "../store/db.ts";
import { dateOf, systemClock, type Clock } from "./clock.ts";
import { CONSENT_TTL_SECONDS } from "./consents.ts";

/** As long as the browser session cookie (and the consents it remembers) lives. */
export const BROWSER_IDENTITY_TTL_SECONDS = CONSENT_TTL_SECONDS;
/**
 * How long after an upstream sign-in the connected-apps page stays open without another one: long
 * enough to look around and revoke, short enough that a shared browser does not keep it open.
 */
export const ACCOUNT_SESSION_SECONDS = 3600;

export interface BrowserIdentity {
  readonly subject: string;
  readonly login: string | null;
  readonly provider: string;
  readonly signedInAt: Date;
}

export class BrowserIdentities {
  constructor(
    private readonly db: Db,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Records a completed upstream sign-in in this browser (replacing an earlier one). */
  async remember(browserSessionId: string, identity: Omit<BrowserIdentity, "signedInAt">): Promise<void> {
    const signedInAt = dateOf(this.clock);
    const expiresAt = new Date(signedInAt.getTime() + BROWSER_IDENTITY_TTL_SECONDS * 1000);
    const data = { subject: identity.subject, login: identity.login, provider: identity.provider, signedInAt, expiresAt };
    await this.db.browserIdentity.upsert({ where: { browserSessionId }, create: { browserSessionId, ...data }, update: data });
  }

  /** The last sign-in in this browser, if any and not expired. */
  async of(browserSessionId: string | null): Promise<BrowserIdentity | null> {
    if (!browserSessionId) return null;
    const row = await this.db.browserIdentity.findUnique({ where: { browserSessionId } });
    if (!row || row.expiresAt <= dateOf(this.clock)) return null;
    return { subject: row.subject, login: row.login, provider: row.provider, signedInAt: row.signedInAt };
  }

  /** The identity, only when its sign-in is recent enough to open the connected-apps page. */
  async forAccountPage(browserSessionId: string | null): Promise<BrowserIdentity | null> {
    const identity = await this.of(browserSessionId);
    if (!identity || this.clock.now() - identity.signedInAt.getTime() >= ACCOUNT_SESSION_SECONDS * 1000) return null;
    return identity;
  }

  /** Sign out: forgets who this browser was and every consent it remembered. */
  async forget(browserSessionId: string): Promise<void> {
    await this.db.$transaction([
      this.db.browserIdentity.deleteMany({ where: { browserSessionId } }),
      this.db.consent.deleteMany({ where: { browserSessionId } }),
    ]);
  }
}
