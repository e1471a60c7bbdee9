import { describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { SecretBox, DecryptionError } from "../../src/store/secrets.ts";

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
});
