// The broker's own tokens and secrets: minted from 256 random bits, stored only as SHA-256 hashes,
// compared without leaking where they differ. At the bottom of the layers: grants/, store/ and the
// edges use it, it uses nothing of the project.
// crypto.hash is one call into OpenSSL for a short input; createHash builds a Hash object (a stream)
// around it, about 0.5 µs more each, and a token request hashes three to five values.
import { hash, randomBytes, timingSafeEqual } from "node:crypto";

/** 256 bits of randomness, base64url, with an optional recognisable prefix (e.g. "mab_at_"). */
export function randomToken(prefix = ""): string {
  return prefix + randomBytes(32).toString("base64url");
}

export function sha256Hex(value: string): string {
  return hash("sha256", value, "hex");
}

/** Constant-time comparison of two strings (hash them first so lengths never leak). */
export function constantTimeEqual(a: string, b: string): boolean {
  return timingSafeEqual(hash("sha256", a, "buffer"), hash("sha256", b, "buffer")) && a.length === b.length;
}

/** The first characters of a token, safe to show and log. */
export function displayPrefix(token: string): string {
  return token.slice(0, Math.min(12, Math.floor(token.length / 4)));
}
