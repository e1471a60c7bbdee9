// The broker's own tokens and secrets: minted from 256 random bits, stored only as SHA-256 hashes,
// compared without leaking where they differ. At the bottom of the layers: grants/, store/ and the
// edges use it, it uses nothing of the project.
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** 256 bits of randomness, base64url, with an optional recognisable prefix (e.g. "mab_at_"). */
export function randomToken(prefix = ""): string {
  return prefix + randomBytes(32).toString("base64url");
}

export function sha256Hex(value: string): string {
  return createHash("sha256").update(value, "utf8").digest("hex");
}

/** Constant-time comparison of two strings (hash them first so lengths never leak). */
export function constantTimeEqual(a: string, b: string): boolean {
  const ha = createHash("sha256").update(a, "utf8").digest();
  const hb = createHash("sha256").update(b, "utf8").digest();
  return timingSafeEqual(ha, hb) && a.length === b.length;
}

/** The first characters of a token, safe to show and log. */
export function displayPrefix(token: string): string {
  return token.slice(0, Math.min(12, Math.floor(token.length / 4)));
}
