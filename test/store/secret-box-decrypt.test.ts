// Upstream tokens at rest are read on every upstream re-check (src/grants/upstream-sessions.ts)
// through SecretBox.decrypt, which reads the compact JWE with node:crypto instead of jose. These
// tests hold it to jose's format and to everything AES-GCM must refuse.
import { describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { CompactEncrypt, compactDecrypt } from "jose";
import { DecryptionError, SecretBox } from "../../src/store/secrets.ts";
import { purposeKey } from "../../src/crypto/keys.ts";

const secret = randomBytes(32);
const box = new SecretBox(secret);
/** The box's key as jose would use it: the same HKDF output. */
const rawKey = purposeKey(secret, "at-rest-encryption/v1");

/** A JWE written by jose itself under the box's key, with any header. */
function joseWrites(plaintext: string, header: Record<string, unknown>): Promise<string> {
  return new CompactEncrypt(new TextEncoder().encode(plaintext)).setProtectedHeader({ alg: "dir", enc: "A256GCM", ...header }).encrypt(rawKey);
}

/** `jwe` with segment `index` decoded, one bit flipped, and encoded again. */
function flipBit(jwe: string, index: number): string {
  const parts = jwe.split(".");
  const bytes = Buffer.from(parts[index]!, "base64url");
  bytes[0]! ^= 1;
  parts[index] = bytes.toString("base64url");
  return parts.join(".");
}

describe("SecretBox.decrypt", () => {
  it("reads what encrypt wrote, and jose reads it the same", async () => {
    for (const plaintext of ["gho_upstream_token", "ünïcødé ✓ token", "x".repeat(5000)]) {
      const jwe = await box.encrypt(plaintext);
      expect(await box.decrypt(jwe)).toBe(plaintext);
      expect(new TextDecoder().decode((await compactDecrypt(jwe, rawKey)).plaintext)).toBe(plaintext);
    }
  });

  it("reads a JWE jose wrote under the same key and key id", async () => {
    expect(await box.decrypt(await joseWrites("from jose", { kid: box.keyId }))).toBe("from jose");
  });

  it("refuses a changed header, IV, ciphertext or tag", async () => {
    const jwe = await box.encrypt("gho_upstream_token");
    // The header with one more member: same key id, but the additional data no longer matches.
    const [, ...rest] = jwe.split(".");
    const otherHeader = Buffer.from(JSON.stringify({ alg: "dir", enc: "A256GCM", kid: box.keyId, x: 1 })).toString("base64url");
    const changed = [[otherHeader, ...rest].join("."), flipBit(jwe, 2), flipBit(jwe, 3), flipBit(jwe, 4)];
    for (const value of changed) await expect(box.decrypt(value)).rejects.toThrow(DecryptionError);
  });

  it("refuses a truncated tag or IV", async () => {
    const parts = (await box.encrypt("gho_upstream_token")).split(".");
    const shortTag = [...parts.slice(0, 4), Buffer.from(parts[4]!, "base64url").subarray(0, 12).toString("base64url")].join(".");
    const shortIv = [parts[0], parts[1], Buffer.from(parts[2]!, "base64url").subarray(0, 8).toString("base64url"), parts[3], parts[4]].join(".");
    await expect(box.decrypt(shortTag)).rejects.toThrow(DecryptionError);
    await expect(box.decrypt(shortIv)).rejects.toThrow(DecryptionError);
  });

  it("refuses a value written under another key that claims this key's id", async () => {
    const forged = await new CompactEncrypt(new TextEncoder().encode("forged"))
      .setProtectedHeader({ alg: "dir", enc: "A256GCM", kid: box.keyId })
      .encrypt(randomBytes(32));
    await expect(box.decrypt(forged)).rejects.toThrow(DecryptionError);
  });

  it("refuses what encrypt never writes: other algorithms, compression, critical extensions, other shapes", async () => {
    const notOurs = [
      await joseWrites("t", { kid: box.keyId, zip: "DEF" }).catch(() => undefined),
      await joseWrites("t", { kid: box.keyId, crit: ["exp"], exp: 1 }).catch(() => undefined),
      `${Buffer.from(JSON.stringify({ alg: "A256KW", enc: "A256GCM", kid: box.keyId })).toString("base64url")}.AAAA.AAAAAAAAAAAAAAAA.AAAA.AAAAAAAAAAAAAAAAAAAAAA`,
      "not a jwe",
      "a.b.c.d",
      (await box.encrypt("t")).replace(/^([^.]*)\./, "$1.AAAA."),
      (await box.encrypt("t")).replace(/^[^.]*/, "bm90IGpzb24"),
    ].filter((v): v is string => v !== undefined);
    expect(notOurs.length).toBeGreaterThanOrEqual(5);
    for (const value of notOurs) await expect(box.decrypt(value)).rejects.toThrow(DecryptionError);
  });

  it("names the missing key when the key id is unknown", async () => {
    const written = await new SecretBox(randomBytes(32)).encrypt("other");
    await expect(box.decrypt(written)).rejects.toThrow(/SECRET_KEY_PREVIOUS/);
  });
});
