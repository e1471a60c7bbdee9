// Keys derived from SECRET_KEY with HKDF, one per purpose (encryption at rest, cookie signing, CSRF
// tokens, rate-limit keys…): no key serves two purposes, and rotating SECRET_KEY rotates them all.
import { createHash, hkdfSync } from "node:crypto";

export interface DerivedKey {
  readonly kid: string;
  readonly key: Uint8Array;
}

/** The key for `purpose`, with a short id naming it (stored beside what it encrypted). */
export function derive(secret: Buffer, purpose: string): DerivedKey {
  const key = new Uint8Array(hkdfSync("sha256", secret, Buffer.from("mcp-auth-broker"), Buffer.from(purpose), 32));
  const kid = createHash("sha256").update(key).digest("base64url").slice(0, 12);
  return { kid, key };
}

/** Key material for one purpose (HKDF): no key serves two purposes. */
export function purposeKey(secretKey: Buffer, purpose: string): Uint8Array {
  return derive(secretKey, purpose).key;
}

/** A separate HKDF output for signing cookies, so no key serves two purposes. */
export function cookieKeys(secretKey: Buffer, previousKeys: readonly Buffer[] = []): string[] {
  return [secretKey, ...previousKeys].map((k) => Buffer.from(derive(k, "cookie-signing/v1").key).toString("base64url"));
}
