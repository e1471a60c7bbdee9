// Secrets at rest: the broker's own tokens and client secrets are stored only as SHA-256 hashes;
// upstream tokens are encrypted (JWE, dir + A256GCM) under a key derived from SECRET_KEY with HKDF.
// The JWE header carries a key id, so after SECRET_KEY is rotated the rows written under the
// previous key (SECRET_KEY_PREVIOUS) can still be read.
import { createHash, hkdfSync, randomBytes, timingSafeEqual, webcrypto } from "node:crypto";
import { CompactEncrypt, compactDecrypt, decodeProtectedHeader } from "jose";

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

interface DerivedKey {
  readonly kid: string;
  readonly key: Uint8Array;
}

/** An encryption key imported once: jose imports a raw key anew on every call (~55 µs of ~130 per decryption). */
interface EncryptionKey extends DerivedKey {
  readonly cryptoKey: Promise<webcrypto.CryptoKey>;
}

function encryptionKey(secret: Buffer): EncryptionKey {
  const derived = derive(secret, "at-rest-encryption/v1");
  return { ...derived, cryptoKey: webcrypto.subtle.importKey("raw", derived.key, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]) };
}

function derive(secret: Buffer, purpose: string): DerivedKey {
  const key = new Uint8Array(hkdfSync("sha256", secret, Buffer.from("mcp-auth-broker"), Buffer.from(purpose), 32));
  const kid = createHash("sha256").update(key).digest("base64url").slice(0, 12);
  return { kid, key };
}

export class DecryptionError extends Error {}

export class SecretBox {
  private readonly current: EncryptionKey;
  private readonly byKid: Map<string, EncryptionKey>;

  constructor(secretKey: Buffer, previousKeys: readonly Buffer[] = []) {
    this.current = encryptionKey(secretKey);
    this.byKid = new Map([this.current, ...previousKeys.map(encryptionKey)].map((k) => [k.kid, k]));
  }

  get keyId(): string {
    return this.current.kid;
  }

  async encrypt(plaintext: string): Promise<string> {
    return new CompactEncrypt(new TextEncoder().encode(plaintext))
      .setProtectedHeader({ alg: "dir", enc: "A256GCM", kid: this.current.kid })
      .encrypt(await this.current.cryptoKey);
  }

  async decrypt(jwe: string): Promise<string> {
    let kid: string | undefined;
    try {
      kid = decodeProtectedHeader(jwe).kid;
    } catch {
      throw new DecryptionError("stored value is not a JWE");
    }
    const key = kid ? this.byKid.get(kid) : undefined;
    if (!key) throw new DecryptionError(`no key with id ${kid ?? "(none)"}: was SECRET_KEY changed without keeping the old one in SECRET_KEY_PREVIOUS?`);
    const { plaintext } = await compactDecrypt(jwe, await key.cryptoKey);
    return new TextDecoder().decode(plaintext);
  }

  async encryptOptional(value: string | null | undefined): Promise<string | null> {
    return value ? this.encrypt(value) : null;
  }

  async decryptOptional(value: string | null | undefined): Promise<string | null> {
    return value ? this.decrypt(value) : null;
  }
}

/** Key material for one purpose (HKDF): no key serves two purposes. */
export function purposeKey(secretKey: Buffer, purpose: string): Uint8Array {
  return derive(secretKey, purpose).key;
}

/** A separate HKDF output for signing cookies, so no key serves two purposes. */
export function cookieKeys(secretKey: Buffer, previousKeys: readonly Buffer[] = []): string[] {
  return [secretKey, ...previousKeys].map((k) => Buffer.from(derive(k, "cookie-signing/v1").key).toString("base64url"));
}
