// The pair a refresh token rotates to (grants/token-format.ts): one HMAC-SHA512 of the presented
// token split in two, the same pair for the same token (a retry within the grace window), a
// different one for another token or another key; and a retried rotation's pair is found by the
// key its refresh token was stored under, whichever derivation made it.
import { describe, expect, it } from "@jest/globals";
import { createHmac, randomBytes } from "node:crypto";
import { deriveSuccessorPair, deriveSuccessorPairOfTwoMacs, hashPresentedToken, storedSuccessorPair, tokenStamp } from "../../src/grants/token-format.ts";

const key = randomBytes(32);
const presented = `mab_rt_${randomBytes(32).toString("base64url")}${tokenStamp(Date.UTC(2031, 4, 6))}`;
const stamp = tokenStamp(Date.UTC(2031, 4, 6, 0, 1));

describe("the successor pair", () => {
  it("is the two halves of one HMAC-SHA512 of the presented token, each a stamped token of 256 bits", () => {
    const pair = deriveSuccessorPair(key, presented, stamp);
    const mac = createHmac("sha512", key).update(`pair:${presented}`).digest();
    expect(pair.access.value).toBe(`mab_at_${mac.subarray(0, 32).toString("base64url")}${stamp}`);
    expect(pair.successor.value).toBe(`mab_rt_${mac.subarray(32).toString("base64url")}${stamp}`);
    for (const secret of [pair.access, pair.successor]) {
      expect(secret.value).toMatch(/^mab_(at|rt)_[A-Za-z0-9_-]{43}[0-9a-f]{12}$/);
      expect(secret.hash).toBe(hashPresentedToken(secret.value));
    }
  });

  it("is the same for the same token and key, and another for another token, key or derivation", () => {
    const pair = deriveSuccessorPair(key, presented, stamp);
    expect(deriveSuccessorPair(key, presented, stamp)).toEqual(pair);
    const others = [
      deriveSuccessorPair(randomBytes(32), presented, stamp),
      deriveSuccessorPair(key, `${presented.slice(0, -13)}x${presented.slice(-12)}`, stamp),
      deriveSuccessorPairOfTwoMacs(key, presented, stamp),
    ];
    const secrets = new Set([pair, ...others].flatMap((p) => [p.access.value.slice(7, 50), p.successor.value.slice(7, 50)]));
    expect(secrets.size).toBe(8);
  });

  it("of a retried rotation is found by its refresh token's stored key, from either derivation; an unknown key finds none", () => {
    for (const derive of [deriveSuccessorPair, deriveSuccessorPairOfTwoMacs]) {
      for (const s of [stamp, null]) {
        const pair = derive(key, presented, s);
        expect(storedSuccessorPair(key, presented, pair.successor.hash)).toEqual(pair);
        // The holder of another token, or of the access token alone, rebuilds nothing.
        expect(storedSuccessorPair(key, `${presented}x`, pair.successor.hash)).toBeUndefined();
        expect(storedSuccessorPair(key, pair.access.value, pair.successor.hash)).toBeUndefined();
      }
    }
    expect(storedSuccessorPair(key, presented, hashPresentedToken(`mab_rt_${randomBytes(32).toString("base64url")}${stamp}`))).toBeUndefined();
  });
});
