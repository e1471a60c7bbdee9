// The broker's own credentials: opaque, 256-bit, with a recognisable prefix so they can be spotted
// in logs or secret scanners. Only a hash is stored.
//
// A token ends with a stamp: the milliseconds of its minting, 12 hex digits (48 bits, as in UUID
// version 7). The key a token is stored and looked up by is that stamp followed by the token's
// SHA-256. Why: the key's unique index is written on every token request, and a key that starts
// with a hash sends each insert to a random leaf, so every token of a group commit dirtied a page
// of its own. Keys that start with the time append to the same few pages: on a copy of the bench
// database, a group commit of 9 refresh rotations wrote 108.2 WAL pages with hash-first keys and
// 94.8 with stamped ones (bench row (w) counts them). The stamp carries no secret; the token's secret is still its 256
// random bits, and the stamp reveals only when the token was minted, which its holder knows.
//
// Tokens minted before stamps (prefix and 43 characters) are still looked up by their bare SHA-256,
// the key they were stored with, until they expire.
import { createHmac } from "node:crypto";
import { displayPrefix, randomToken, sha256Hex } from "../crypto/tokens.ts";

export const TOKEN_PREFIX = {
  accessToken: "mab_at_",
  refreshToken: "mab_rt_",
  authorizationCode: "mab_ac_",
} as const;

/** 256 bits in base64url. */
const SECRET_LENGTH = 43;
const STAMP_LENGTH = 12;
const STAMP = /^[0-9a-f]{12}$/;
const PREFIXES = Object.values(TOKEN_PREFIX);

export interface MintedSecret {
  readonly value: string;
  /** The key the token is stored under (see the top of this file). */
  readonly hash: string;
  readonly prefix: string;
}

/** A stamp for the moment `ms` (milliseconds since the epoch). */
export function tokenStamp(ms: number = Date.now()): string {
  return Math.trunc(ms).toString(16).padStart(STAMP_LENGTH, "0").slice(-STAMP_LENGTH);
}

/** The stamp of a token of ours minted with one (its prefix, 43 characters, the stamp); null for any other string. */
function stampIn(token: string): string | null {
  const prefix = PREFIXES.find((p) => token.startsWith(p));
  if (prefix === undefined || token.length !== prefix.length + SECRET_LENGTH + STAMP_LENGTH) return null;
  const stamp = token.slice(-STAMP_LENGTH);
  return STAMP.test(stamp) ? stamp : null;
}

/**
 * The stamp of a stored key, or null for a key stored before stamps (a bare SHA-256): a rotation's
 * retry rebuilds the successor pair with the stamp its rows were stored under.
 */
export function stampOfKey(key: string): string | null {
  return key.length === STAMP_LENGTH + 64 ? key.slice(0, STAMP_LENGTH) : null;
}

/** The key a presented token would be stored under; any string gives one, never an error. */
export function hashPresentedToken(token: string): string {
  const stamp = stampIn(token);
  return stamp === null ? sha256Hex(token) : stamp + sha256Hex(token);
}

function described(value: string): MintedSecret {
  return { value, hash: hashPresentedToken(value), prefix: displayPrefix(value) };
}

export function mintSecret(kind: keyof typeof TOKEN_PREFIX): MintedSecret {
  return described(randomToken(TOKEN_PREFIX[kind]) + tokenStamp());
}

/** The access token and refresh token a refresh token rotates to. */
export interface SuccessorPair {
  readonly access: MintedSecret;
  readonly successor: MintedSecret;
}

const withStamp = (stamp: string | null) => stamp ?? "";

/**
 * The successor pair of a rotated refresh token is derived from the old token with a keyed HMAC, so
 * a client that retries a lost refresh response within the grace window receives the very same new
 * pair: rotation stays idempotent without keeping any plaintext token. Only the holder of the old
 * token (and the server key) can compute it. The stamp is the rotation's (a retry reads it back
 * from the stored successor); null rebuilds a pair minted before stamps.
 *
 * One HMAC-SHA512, split in two halves of 256 bits: the first is the access token's secret, the
 * second the refresh token's. Each half of an HMAC is a pseudorandom function of the old token in
 * its own right (a truncated HMAC, as HMAC-SHA-512-256 of RFC 4868), so the access token says
 * nothing about the refresh token beside it. One HMAC instead of one per token: setting up an
 * HMAC in OpenSSL costs more than hashing the token (perf's samples of the refresh rounds: 3.6% of
 * the event loop for two HMAC-SHA256, 2.9% for one HMAC-SHA512).
 */
export function deriveSuccessorPair(key: Uint8Array, from: string, stamp: string | null): SuccessorPair {
  const mac = createHmac("sha512", key).update("pair:").update(from).digest();
  return {
    access: described(TOKEN_PREFIX.accessToken + mac.toString("base64url", 0, 32) + withStamp(stamp)),
    successor: described(TOKEN_PREFIX.refreshToken + mac.toString("base64url", 32, 64) + withStamp(stamp)),
  };
}

/**
 * The pair as rotations derived it before deriveSuccessorPair: one HMAC-SHA256 per token. A client
 * retrying a rotation made by the version before an upgrade still gets its pair back (otherwise
 * its retry would count as reuse and end its grant); once REFRESH_GRACE_SECONDS have passed since
 * the upgrade, no such retry can succeed any more.
 */
export function deriveSuccessorPairOfTwoMacs(key: Uint8Array, from: string, stamp: string | null): SuccessorPair {
  const derive = (kind: "accessToken" | "refreshToken") =>
    described(TOKEN_PREFIX[kind] + createHmac("sha256", key).update(`${kind}:`).update(from).digest("base64url") + withStamp(stamp));
  return { access: derive("accessToken"), successor: derive("refreshToken") };
}

/** The pair a retried rotation handed out: the one whose refresh token was stored as `successorKey`. */
export function storedSuccessorPair(key: Uint8Array, from: string, successorKey: string): SuccessorPair | undefined {
  const stamp = stampOfKey(successorKey);
  for (const derive of [deriveSuccessorPair, deriveSuccessorPairOfTwoMacs]) {
    const pair = derive(key, from, stamp);
    if (pair.successor.hash === successorKey) return pair;
  }
  return undefined;
}
