// The signed word on who the caller is, for the MCP server (X-Auth-Assertion): a short JWT the
// server verifies against PUBLIC_URL/.well-known/jwks.json, so that a server reachable without the
// broker in front can tell the broker's statement from forged X-Auth-* headers (as Pomerium's
// X-Pomerium-Jwt-Assertion and Cloudflare Access's Cf-Access-Jwt-Assertion do). `aud` is the
// server's resource: an assertion made for one server is no assertion at another.
import { randomBytes } from "node:crypto";
import { SignJWT } from "jose";
import type { CallerIdentity } from "./caller-identity.ts";
import type { SigningKeys } from "./signing-keys.ts";
import type { Clock } from "../lib/clock.ts";
import { boundedCache } from "../lib/bounded-cache.ts";

/** How long an assertion is good for (`exp` − `iat`). */
export const ASSERTION_LIFETIME_SECONDS = 60;
/**
 * An assertion is sent again for half its life: signing costs ~100 µs, a request through the
 * proxy far less, and a server still gets at least 30 s to verify what it received.
 */
const REUSE_MS = (ASSERTION_LIFETIME_SECONDS * 1000) / 2;
const CACHED_ASSERTIONS = 10_000;

interface Made {
  readonly jwt: string;
  readonly reuseUntil: number;
}

export class IdentityAssertions {
  private readonly made = boundedCache<string, Made>(CACHED_ASSERTIONS);

  constructor(
    private readonly keys: SigningKeys,
    private readonly issuer: string,
    private readonly clock: Clock,
  ) {}

  /** The assertion of `identity` for the server whose resource is `audience`. */
  async for(identity: CallerIdentity, audience: string): Promise<string> {
    return (await this.assertion(identity, audience)).jwt;
  }

  /**
   * The assertions for one server (`audience`), as its proxy asks for them on every request. The
   * bearer check hands out one identity object per validated access for as long as the validation
   * cache keeps it, so the assertion last made for that object is found without building the
   * string key below: a plain value, no promise (bench row (m) counts the bytes of each request).
   */
  forAudience(audience: string): (identity: CallerIdentity) => string | Promise<string> {
    const recent = new WeakMap<CallerIdentity, Made>();
    return (identity) => {
      const last = recent.get(identity);
      if (last !== undefined && last.reuseUntil > this.clock.now()) return last.jwt;
      return this.assertion(identity, audience).then((made) => {
        recent.set(identity, made);
        return made.jwt;
      });
    };
  }

  private async assertion(identity: CallerIdentity, audience: string): Promise<Made> {
    const now = this.clock.now();
    // The grant, the server and the scopes decide what is asserted; login and e-mail change only
    // at an upstream re-check, which a 30-second reuse may lag behind by as much.
    const cacheKey = `${identity.grantId}\n${audience}\n${identity.scopes.join(" ")}`;
    const cached = this.made.get(cacheKey);
    if (cached && cached.reuseUntil > now) return cached;
    const made = { jwt: await this.sign(identity, audience, now), reuseUntil: now + REUSE_MS };
    this.made.set(cacheKey, made);
    return made;
  }

  private async sign(identity: CallerIdentity, audience: string, now: number): Promise<string> {
    const key = await this.keys.signing();
    const iat = Math.floor(now / 1000);
    const facts = identity.facts;
    const email = facts.verifiedEmails?.[0];
    const login = facts.login ?? identity.user ?? undefined;
    return new SignJWT({
      client_id: identity.clientId,
      scope: identity.scopes.join(" "),
      ...(login ? { login } : {}),
      ...(email ? { email } : {}),
    })
      .setProtectedHeader({ alg: key.algorithm, kid: key.kid, typ: "JWT" })
      .setIssuer(this.issuer)
      .setAudience(audience)
      .setSubject(identity.subject ?? facts.subject)
      .setIssuedAt(iat)
      .setExpirationTime(iat + ASSERTION_LIFETIME_SECONDS)
      .setJti(randomBytes(16).toString("base64url"))
      .sign(key.privateKey);
  }
}
