// The broker's own credentials: opaque, 256-bit, with a recognisable prefix so they can be spotted
// in logs or secret scanners. Only their SHA-256 is stored.
import { createHmac } from "node:crypto";
import { displayPrefix, randomToken, sha256Hex } from "../crypto/tokens.ts";

export const TOKEN_PREFIX = {
  accessToken: "mab_at_",
  refreshToken: "mab_rt_",
  authorizationCode: "mab_ac_",
} as const;

export interface MintedSecret {
  readonly value: string;
  readonly hash: string;
  readonly prefix: string;
}

function described(value: string): MintedSecret {
  return { value, hash: sha256Hex(value), prefix: displayPrefix(value) };
}

export function mintSecret(kind: keyof typeof TOKEN_PREFIX): MintedSecret {
  return described(randomToken(TOKEN_PREFIX[kind]));
}

/**
 * The successor of a rotated refresh token is derived from the old token with a keyed HMAC, so a
 * client that retries a lost refresh response within the grace window receives the very same new
 * pair: rotation stays idempotent without keeping any plaintext token. Only the holder of the old
 * token (and the server key) can compute it.
 */
export function deriveSecret(kind: "accessToken" | "refreshToken", key: Uint8Array, from: string): MintedSecret {
  const mac = createHmac("sha256", key).update(`${kind}:`).update(from).digest("base64url");
  return described(TOKEN_PREFIX[kind] + mac);
}

export function hashPresentedToken(token: string): string {
  return sha256Hex(token);
}
