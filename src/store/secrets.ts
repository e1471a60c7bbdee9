// Secrets at rest: the broker's own tokens and client secrets are stored only as SHA-256 hashes;
// upstream tokens are encrypted (JWE, dir + A256GCM) under a key derived from SECRET_KEY with HKDF.
// The JWE header carries a key id, so after SECRET_KEY is rotated the rows written under the
// previous key (SECRET_KEY_PREVIOUS) can still be read.
import { createDecipheriv, createSecretKey, webcrypto, type KeyObject } from "node:crypto";
import { CompactEncrypt } from "jose";
import { derive, type DerivedKey } from "../crypto/keys.ts";

/**
 * An encryption key imported once: jose imports a raw key anew on every call (~55 µs of ~130 per
 * encryption); `secretKey` serves node:crypto's decipher.
 */
interface EncryptionKey extends DerivedKey {
  readonly cryptoKey: Promise<webcrypto.CryptoKey>;
  readonly secretKey: KeyObject;
}

function encryptionKey(secret: Buffer): EncryptionKey {
  const derived = derive(secret, "at-rest-encryption/v1");
  return {
    ...derived,
    cryptoKey: webcrypto.subtle.importKey("raw", derived.key, { name: "AES-GCM" }, false, ["encrypt", "decrypt"]),
    secretKey: createSecretKey(derived.key),
  };
}

/** AES-GCM's IV and tag sizes as JWE's A256GCM fixes them (RFC 7518 §5.3). */
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The protected header of a compact JWE this box wrote, or undefined when it is not one. */
function protectedHeader(segment: string): { kid?: unknown } | undefined {
  try {
    const header: unknown = JSON.parse(Buffer.from(segment, "base64url").toString("utf8"));
    if (typeof header !== "object" || header === null || Array.isArray(header)) return undefined;
    const { alg, enc, zip, crit } = header as Record<string, unknown>;
    // Only what encrypt() writes: a row with another algorithm, compression or critical
    // extensions was not written by this broker.
    if (alg !== "dir" || enc !== "A256GCM" || zip !== undefined || crit !== undefined) return undefined;
    return header;
  } catch {
    return undefined;
  }
}

export class DecryptionError extends Error {}

/** The protected header encrypt() writes for key `kid`: JSON in this key order, as jose serialises it. */
function headerSegment(kid: string): string {
  return Buffer.from(JSON.stringify({ alg: "dir", enc: "A256GCM", kid }), "utf8").toString("base64url");
}

/** The key id in a stored value's header (nothing is decrypted); undefined when it is not a JWE this box writes. */
export function storedKeyId(jwe: string): string | undefined {
  const parts = jwe.split(".");
  const header = parts.length === 5 && parts[1] === "" ? protectedHeader(parts[0]!) : undefined;
  return typeof header?.kid === "string" ? header.kid : undefined;
}

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

  /**
   * How every value written under one of this box's keys begins (its header segment and the dot):
   * a store can pick out the rows some other key wrote by their first characters, without
   * decrypting anything. A value that does not begin so may still be readable (another header
   * serialisation): `canRead` decides.
   */
  get storedPrefixes(): string[] {
    return [...this.byKid.keys()].map((kid) => `${headerSegment(kid)}.`);
  }

  /** Whether a stored value was written under one of this box's keys (from its header; nothing is decrypted). */
  canRead(jwe: string): boolean {
    const kid = storedKeyId(jwe);
    return kid !== undefined && this.byKid.has(kid);
  }

  async encrypt(plaintext: string): Promise<string> {
    return new CompactEncrypt(new TextEncoder().encode(plaintext))
      .setProtectedHeader({ alg: "dir", enc: "A256GCM", kid: this.current.kid })
      .encrypt(await this.current.cryptoKey);
  }

  /**
   * Reads a compact JWE (dir + A256GCM) with node:crypto's synchronous AES-GCM: through jose and
   * WebCrypto a decryption cost ~100 µs of CPU (an async job, WebIDL checks), this ~15 µs, and
   * the upstream re-check decrypts on every check. GCM authenticates the header segment (the
   * additional data), the IV, the ciphertext and the full 16-byte tag: any change fails.
   */
  async decrypt(jwe: string): Promise<string> {
    const parts = jwe.split(".");
    const header = parts.length === 5 && parts[1] === "" ? protectedHeader(parts[0]!) : undefined;
    if (!header) throw new DecryptionError("stored value is not a JWE");
    const kid = typeof header.kid === "string" ? header.kid : undefined;
    const key = kid ? this.byKid.get(kid) : undefined;
    if (!key) throw new DecryptionError(`no key with id ${kid ?? "(none)"}: was SECRET_KEY changed without keeping the old one in SECRET_KEY_PREVIOUS?`);
    const iv = Buffer.from(parts[2]!, "base64url");
    const tag = Buffer.from(parts[4]!, "base64url");
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new DecryptionError("stored value is not a JWE");
    try {
      const decipher = createDecipheriv("aes-256-gcm", key.secretKey, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(Buffer.from(parts[0]!, "ascii"));
      decipher.setAuthTag(tag);
      const plaintext = Buffer.concat([decipher.update(Buffer.from(parts[3]!, "base64url")), decipher.final()]);
      return plaintext.toString("utf8");
    } catch {
      throw new DecryptionError("stored value failed authentication: it was changed, or written under another key with the same id");
    }
  }

  async encryptOptional(value: string | null | undefined): Promise<string | null> {
    return value ? this.encrypt(value) : null;
  }

  async decryptOptional(value: string | null | undefined): Promise<string | null> {
    return value ? this.decrypt(value) : null;
  }
}
