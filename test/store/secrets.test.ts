import { describe, expect, it } from "@jest/globals";
import { createHash, randomBytes } from "node:crypto";
import { SecretBox, randomToken, sha256Hex, DecryptionError } from "../../src/store/secrets.ts";

describe("secrets at rest", () => {
  it("encrypts with JWE dir+A256GCM and a key id, and decrypts", async () => {
    const box = new SecretBox(randomBytes(32));
    const jwe = await box.encrypt("gho_upstream_token");
    expect(jwe).not.toContain("gho_upstream_token");
    const header = JSON.parse(Buffer.from(jwe.split(".")[0]!, "base64url").toString());
    expect(header).toEqual({ alg: "dir", enc: "A256GCM", kid: box.keyId });
    expect(await box.decrypt(jwe)).toBe("gho_upstream_token");
  });

  it("reads rows written under a rotated-out key when it is kept as previous", async () => {
    const oldKey = randomBytes(32);
    const written = await new SecretBox(oldKey).encrypt("old-row");
    const rotated = new SecretBox(randomBytes(32), [oldKey]);
    expect(await rotated.decrypt(written)).toBe("old-row");
    await expect(new SecretBox(randomBytes(32)).decrypt(written)).rejects.toBeInstanceOf(DecryptionError);
  });

  it("tells from a stored value's first characters which key wrote it, without decrypting", async () => {
    const oldKey = randomBytes(32);
    const written = await new SecretBox(oldKey).encrypt("old-row");
    const rotated = new SecretBox(randomBytes(32), [oldKey]);
    const fresh = await rotated.encrypt("new-row");
    expect(rotated.storedPrefixes).toHaveLength(2);
    for (const value of [written, fresh]) {
      expect(rotated.storedPrefixes.some((p) => value.startsWith(p))).toBe(true);
      expect(rotated.canRead(value)).toBe(true);
    }
    const stranger = new SecretBox(randomBytes(32));
    expect(stranger.storedPrefixes.some((p) => written.startsWith(p) || fresh.startsWith(p))).toBe(false);
    expect(stranger.canRead(written)).toBe(false);
    expect(stranger.canRead("not a JWE")).toBe(false);
  });

  it("mints 256-bit tokens (43 base64url characters after the prefix), each one new", () => {
    const t = randomToken("mab_at_");
    expect(t).toMatch(/^mab_at_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(t.slice("mab_at_".length), "base64url")).toHaveLength(32);
    expect(new Set(Array.from({ length: 1000 }, () => randomToken("mab_at_"))).size).toBe(1000);
    expect(sha256Hex(t)).toBe(createHash("sha256").update(t).digest("hex"));
  });
});
