// The broker's own tokens: 256 random bits, base64url, a prefix that names the kind.
import { describe, expect, it } from "@jest/globals";
import { createHash } from "node:crypto";
import { randomToken, sha256Hex } from "../../src/crypto/tokens.ts";

describe("tokens", () => {
  it("mints 256-bit tokens (43 base64url characters after the prefix), each one new", () => {
    const t = randomToken("mab_at_");
    expect(t).toMatch(/^mab_at_[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(t.slice("mab_at_".length), "base64url")).toHaveLength(32);
    expect(new Set(Array.from({ length: 1000 }, () => randomToken("mab_at_"))).size).toBe(1000);
    expect(sha256Hex(t)).toBe(createHash("sha256").update(t).digest("hex"));
  });
});
