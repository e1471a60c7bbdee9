// A refresh or a code exchange hashes the presented token once: the pre-read's key is reused when
// (and only when) it was computed from the very string the grant parsed.
import { describe, expect, it } from "@jest/globals";
import { presentedKey, type Preread } from "../../src/grants/token/context.ts";
import { hashPresentedToken } from "../../src/grants/token-format.ts";

const token = "mab_rt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA019ac0b1c2d3";
// A key no hash gives: seen back only when the pre-read's is reused.
const preread = (grantType: Preread["grantType"], presented: string): Preread => ({ grantType, presented, hash: "pre-read key", row: null });

describe("the key of a presented token", () => {
  it("is the pre-read's for the same grant type and the same string", () => {
    expect(presentedKey(preread("refresh_token", token), "refresh_token", token)).toBe("pre-read key");
    expect(presentedKey(preread("authorization_code", "code-1"), "authorization_code", "code-1")).toBe("pre-read key");
  });

  it("is hashed anew for another string, another grant type, or no pre-read", () => {
    const hashed = hashPresentedToken(token);
    expect(presentedKey(preread("refresh_token", `${token} `), "refresh_token", token)).toBe(hashed);
    expect(presentedKey(preread("authorization_code", token), "refresh_token", token)).toBe(hashed);
    expect(presentedKey(null, "refresh_token", token)).toBe(hashed);
    expect(presentedKey(undefined, "authorization_code", token)).toBe(hashed);
  });
});
