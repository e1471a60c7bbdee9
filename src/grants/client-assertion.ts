// private_key_jwt (RFC 7523 §2.2, §3): a client proves itself with a JWT it signed with a key whose
// public half it registered or publishes (client-keys.ts). Checked here: the algorithm, from an
// allow-list of asymmetric ones and never taken from the token alone (alg "none", or HS256 "signed"
// with the client's public key as the secret, are the classic forgeries); the signature; iss = sub =
// the client; aud = this server (its token endpoint, its issuer, or the endpoint called); exp
// present and near; and the jti, accepted once until the assertion expires, on every instance
// (the hot store's UsedAssertion table).
import {
  createLocalJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  errors,
  jwtVerify,
  type JWTPayload,
  type JWTVerifyOptions,
  type ProtectedHeaderParameters,
} from "jose";
import type { HotStore } from "../store/hot-store.ts";
import { sha256Hex } from "../crypto/tokens.ts";
import type { ClientKeys } from "./client-keys.ts";
import type { Clock } from "../lib/clock.ts";
import { InvalidClient } from "./errors.ts";
import type { JsonWebKeySet, RegisteredClient } from "./types.ts";
import { firstLine } from "../lib/error-text.ts";

export const CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/** Asymmetric signatures only (AS metadata token_endpoint_auth_signing_alg_values_supported). */
export const ASSERTION_ALGORITHMS: readonly string[] = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];
/** How far the client's clock may be off from this server's. */
export const CLOCK_SKEW_SECONDS = 60;
/**
 * The longest an assertion may still have to live when it arrives: it is made for one request
 * (RFC 7523 §3 asks for short lifetimes; the MCP SDK signs for 300 s), and its jti is remembered
 * that long.
 */
export const MAX_LIFETIME_SECONDS = 600;
const MAX_ASSERTION_LENGTH = 16 * 1024;
const MAX_JTI_LENGTH = 256;

/** The endpoints an assertion's aud may name: this server's issuer, its token endpoint, and the endpoint called. */
export interface AssertionAudience {
  readonly issuer: string;
  readonly tokenEndpoint: string;
}

function invalid(description: string): InvalidClient {
  return new InvalidClient(`client_assertion: ${description}`);
}

/**
 * The client an assertion says it is from (its sub; else its iss), read WITHOUT verifying anything:
 * only to find whose keys to verify it with when the request names no client_id (RFC 7523 §3: the
 * sub is the client_id). Undefined when it is not a readable JWT.
 */
export function assertionClientId(assertion: string): string | undefined {
  if (assertion.length > MAX_ASSERTION_LENGTH) return undefined;
  try {
    const claims = decodeJwt(assertion);
    const id = claims.sub ?? claims.iss;
    return typeof id === "string" && id.length > 0 ? id : undefined;
  } catch {
    return undefined;
  }
}

export class ClientAssertions {
  constructor(
    private readonly keys: ClientKeys,
    private readonly hot: HotStore,
    private readonly clock: Clock,
    private readonly audience: AssertionAudience,
  ) {}

  /**
   * Accepts `assertion` as `client`'s authentication at `endpoint` (the URL the request was sent
   * to), and uses up its jti; throws InvalidClient saying what does not hold.
   */
  async verify(client: RegisteredClient, assertion: string, endpoint: string): Promise<void> {
    if (assertion.length > MAX_ASSERTION_LENGTH) throw invalid(`it is longer than ${MAX_ASSERTION_LENGTH} characters.`);
    let header: ProtectedHeaderParameters;
    try {
      header = decodeProtectedHeader(assertion);
    } catch {
      throw invalid("it is not a signed JWT (three base64url parts: header, claims, signature).");
    }
    const allowed = client.signingAlg ? [client.signingAlg] : ASSERTION_ALGORITHMS;
    if (typeof header.alg !== "string" || !allowed.includes(header.alg)) {
      const alg = JSON.stringify(header.alg ?? null).slice(0, 40);
      throw invalid(
        header.alg === "none"
          ? "it is not signed (alg none). Sign it with the client's private key."
          : `it is signed with alg ${alg}, which this client may not use: ${client.signingAlg ? `its registration names ${client.signingAlg}` : `accepted are ${ASSERTION_ALGORITHMS.join(", ")} (asymmetric signatures only)`}.`,
      );
    }
    const now = this.clock.now();
    const audiences = [...new Set([this.audience.tokenEndpoint, this.audience.issuer, endpoint])];
    const options: JWTVerifyOptions = {
      algorithms: [...allowed],
      issuer: client.id,
      subject: client.id,
      audience: audiences,
      currentDate: new Date(now),
      clockTolerance: CLOCK_SKEW_SECONDS,
      requiredClaims: ["exp", "jti"],
    };
    const payload = await this.verified(client, assertion, header, options);
    const exp = payload.exp!;
    if (exp > now / 1000 + MAX_LIFETIME_SECONDS + CLOCK_SKEW_SECONDS)
      throw invalid(`it expires too late (exp is ${Math.round(exp - now / 1000)} s ahead): an assertion may live at most ${MAX_LIFETIME_SECONDS} s.`);
    if (typeof payload.iat === "number" && payload.iat > now / 1000 + CLOCK_SKEW_SECONDS) throw invalid("it was issued in the future (iat).");
    const jti = payload.jti;
    if (typeof jti !== "string" || jti.length === 0 || jti.length > MAX_JTI_LENGTH)
      throw invalid(`its jti must be a string of 1 to ${MAX_JTI_LENGTH} characters.`);
    // Remembered as long as the assertion could still be accepted (its exp plus the skew allowed).
    const key = sha256Hex(`${client.id}\n${jti}`);
    if (!(await this.hot.claimAssertion(key, new Date((exp + CLOCK_SKEW_SECONDS) * 1000), new Date(now))))
      throw invalid("it was presented before. Each assertion (its jti) is accepted once: sign a new one for every request.");
  }

  /** The verified claims, with the client's keys; its published set fetched again once when no key matched. */
  private async verified(client: RegisteredClient, assertion: string, header: ProtectedHeaderParameters, options: JWTVerifyOptions): Promise<JWTPayload> {
    try {
      return await verifyWith(await this.keys.of(client), assertion, options);
    } catch (err) {
      if (!(err instanceof errors.JWKSNoMatchingKey)) throw describe(err, client, header, this.audience);
      const refreshed = await this.keys.refreshed(client);
      if (!refreshed) throw describe(err, client, header, this.audience);
      try {
        return await verifyWith(refreshed, assertion, options);
      } catch (again) {
        throw describe(again, client, header, this.audience);
      }
    }
  }
}

/**
 * jose's key lookup per key set, made once: it imports each key on first use and keeps it, which
 * halves the CPU of a verification (330 µs per RS256 assertion with a lookup made per call, 131 µs
 * with one kept, on this project's 2-core machine). The key sets themselves are cached objects
 * (client-keys.ts, clients.ts), so this lives as long as they do.
 */
const lookups = new WeakMap<JsonWebKeySet, ReturnType<typeof createLocalJWKSet>>();

function lookupOf(set: JsonWebKeySet): ReturnType<typeof createLocalJWKSet> {
  let lookup = lookups.get(set);
  if (!lookup) {
    lookup = createLocalJWKSet({ keys: [...set.keys] });
    lookups.set(set, lookup);
  }
  return lookup;
}

/** Verifies with a key set; several keys fitting the header (no kid) are each tried. */
async function verifyWith(set: JsonWebKeySet, assertion: string, options: JWTVerifyOptions): Promise<JWTPayload> {
  try {
    return (await jwtVerify(assertion, lookupOf(set), options)).payload;
  } catch (err) {
    if (!(err instanceof errors.JWKSMultipleMatchingKeys)) throw err;
    for await (const key of err) {
      try {
        return (await jwtVerify(assertion, key, options)).payload;
      } catch (attempt) {
        if (!(attempt instanceof errors.JWSSignatureVerificationFailed)) throw attempt;
      }
    }
    throw new errors.JWSSignatureVerificationFailed();
  }
}

/** What a verification failure tells the client (jose's messages name no secret). */
function describe(err: unknown, client: RegisteredClient, header: ProtectedHeaderParameters, audience: AssertionAudience): InvalidClient {
  if (err instanceof InvalidClient) return err;
  const kid = typeof header.kid === "string" ? `kid ${JSON.stringify(header.kid.slice(0, 100))}` : "no kid";
  if (err instanceof errors.JWKSNoMatchingKey) return invalid(`no key of the client's key set fits it (${kid}, alg ${header.alg}).`);
  if (err instanceof errors.JWSSignatureVerificationFailed) return invalid(`its signature does not verify with the client's keys (${kid}).`);
  if (err instanceof errors.JWTExpired) return invalid("it has expired (exp).");
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "iss" || err.claim === "sub") return invalid(`its iss and sub must both be the client_id, ${client.id}.`);
    if (err.claim === "aud")
      return invalid(`its aud must name this server: its token endpoint (${audience.tokenEndpoint}) or its issuer (${audience.issuer}).`);
    if (err.reason === "missing") return invalid(`it has no ${err.claim} claim, which is required (an assertion must expire and carry a unique jti).`);
    return invalid(`its ${err.claim} claim does not hold: ${err.message}.`);
  }
  if (err instanceof errors.JOSEError) return invalid(`it could not be verified: ${err.message}.`);
  // A key jose refused to import (an RSA key under 2048 bits…) fails like a bad signature would.
  return invalid(`it could not be verified with the client's keys: ${firstLine(err)}.`);
}
