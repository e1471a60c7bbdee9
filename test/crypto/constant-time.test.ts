// constantTimeEqual never compares the strings themselves: both sides are hashed to fixed-length
// digests and compared with crypto.timingSafeEqual, so neither a common prefix nor a length
// difference changes the work done. Watched through node:crypto rather than by timing it.
import { describe, expect, it, jest } from "@jest/globals";

const crypto = await import("node:crypto");
const compared: Array<[Buffer, Buffer]> = [];
jest.unstable_mockModule("node:crypto", () => ({
  ...crypto,
  default: crypto,
  timingSafeEqual: (a: NodeJS.ArrayBufferView, b: NodeJS.ArrayBufferView) => {
    compared.push([Buffer.from(a.buffer, a.byteOffset, a.byteLength), Buffer.from(b.buffer, b.byteOffset, b.byteLength)]);
    return crypto.timingSafeEqual(a, b);
  },
}));
const { constantTimeEqual } = await import("../../src/crypto/tokens.ts");

describe("constantTimeEqual", () => {
  it.each([
    ["equal strings", "mab_rt_secret", "mab_rt_secret", true],
    ["a difference in the last character", "mab_rt_secret", "mab_rt_secreT", false],
    ["a difference in the first character", "mab_rt_secret", "Mab_rt_secret", false],
    ["a prefix", "mab_rt_secret", "mab_rt_", false],
    ["different lengths", "a", "a".repeat(5000), false],
    ["the empty string", "", "", true],
  ])("compares two 32-byte digests through timingSafeEqual: %s", (_what, a, b, equal) => {
    compared.length = 0;
    expect(constantTimeEqual(a, b)).toBe(equal);
    expect(compared).toHaveLength(1);
    const [x, y] = compared[0]!;
    expect([x.length, y.length]).toEqual([32, 32]);
    expect(x.equals(crypto.createHash("sha256").update(a).digest())).toBe(true);
    expect(y.equals(crypto.createHash("sha256").update(b).digest())).toBe(true);
  });
});
