// Who signed in at the upstream IdP in a browser, last: the consent page names them ("signed in as
// octocat") and the connected-apps page (/account) lists their grants. Kept server-side under the
// browser session id; the cookie holds nothing but that id. Every sign-in moves the browser to a
// new id (session fixation: the id it had may be a copy an attacker planted), and so does sign-out.
import { randomBytes } from "node:crypto";
import type { Db } from "../store/db.ts";
import { dateOf, systemClock, type Clock } from "../lib/clock.ts";
import { CONSENT_TTL_SECONDS } from "./consents.ts";

/** As long as the browser session cookie (and the consents it remembers) lives. */
export const BROWSER_IDENTITY_TTL_SECONDS = CONSENT_TTL_SECONDS;
/**
 * How long after an upstream sign-in the connected-apps page stays open without another one: long
 * enough to look around and revoke, short enough that a shared browser does not keep it open.
 */
export const ACCOUNT_SESSION_SECONDS = 3600;

/** A new browser session id: 256 random bits, the only thing the session cookie carries. */
export function newBrowserSessionId(): string {
  return randomBytes(32).toString("base64url");
}

/** What newBrowserSessionId makes (and all a session cookie may carry). */
export const BROWSER_SESSION_ID = /^[A-Za-z0-9_-]{43}$/;

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

  /**
   * Records a completed upstream sign-in in the browser that had the session id `previous`, under
   * a new session id, and returns the new id (for the browser's cookie). Whoever else knows
   * `previous` gets nothing: the old id keeps neither the identity nor a consent. The consents the
   * browser remembered under it move along only when the same person had signed in there before
   * (signing in again); anybody else's (a planted session's, the previous user's of a shared
   * browser) are forgotten.
   */
  async signIn(previous: string | null, identity: Omit<BrowserIdentity, "signedInAt">): Promise<string> {
    const next = newBrowserSessionId();
    const signedInAt = dateOf(this.clock);
    const expiresAt = new Date(signedInAt.getTime() + BROWSER_IDENTITY_TTL_SECONDS * 1000);
    const before = await this.of(previous);
    const samePerson = before !== null && before.subject === identity.subject && before.provider === identity.provider;
    await this.db.$transaction([
      ...(previous
        ? [
            samePerson
              ? this.db.consent.updateMany({ where: { browserSessionId: previous }, data: { browserSessionId: next } })
              : this.db.consent.deleteMany({ where: { browserSessionId: previous } }),
            this.db.browserIdentity.deleteMany({ where: { browserSessionId: previous } }),
          ]
        : []),
      this.db.browserIdentity.create({
        data: { browserSessionId: next, subject: identity.subject, login: identity.login, provider: identity.provider, signedInAt, expiresAt },
      }),
    ]);
    return next;
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
