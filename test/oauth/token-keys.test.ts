// The keys the broker's tokens are stored under (grants/token-format.ts): a token ends with the
// stamp of its minting, and its key is that stamp followed by its SHA-256, so the keys' unique
// indexes append instead of taking a random page per token. Tokens stored before stamps (a bare
// SHA-256 key) keep working over HTTP until they expire: at /mcp, /introspect, /revoke, /token,
// and a retry of a rotation made before the upgrade still gets that rotation's pair back. So does a
// retry of a rotation whose pair was derived with one HMAC per token, as before one HMAC per pair.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { purposeKey } from "../../src/crypto/keys.ts";
import { randomToken, sha256Hex } from "../../src/crypto/tokens.ts";
import { deriveSuccessorPairOfTwoMacs, hashPresentedToken } from "../../src/grants/token-format.ts";
import { mcpStatus } from "../support/mcp-probe.ts";
import { basicAuth, clientAuth, postForm, registerClientSet, tokensThroughFlow, type TestClient, type TokenPair } from "../support/oauth-client.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";

const secretKey = randomBytes(32);
let t: TestBroker;
let pub: TestClient;
let basic: TestClient;
beforeAll(async () => {
  t = await startBroker({ SECRET_KEY: secretKey.toString("base64") });
  ({ pub, basic } = await registerClientSet(t.url, t.broker.database.db));
});
afterAll(async () => t.stop());

type Tokens = TokenPair;
const tokensFor = (client: TestClient): Promise<Tokens> => tokensThroughFlow(t.url, client);
const refresh = (client: TestClient, refreshToken: string) =>
  postForm(`${t.url}/token`, { grant_type: "refresh_token", refresh_token: refreshToken, ...clientAuth(client).form }, clientAuth(client).headers);

const db = () => t.broker.database.db;
/** Stores the token `current` was issued as under the bare SHA-256 of `legacy`, as the broker did before stamps. */
async function storeAsBeforeStamps(kind: "accessToken" | "refreshToken", current: string, legacy: string): Promise<void> {
  const where = { tokenHash: hashPresentedToken(current) };
  const data = { tokenHash: sha256Hex(legacy) };
  if (kind === "accessToken") await db().accessToken.update({ where, data });
  else await db().refreshToken.update({ where, data });
}
/** A token as the broker minted them before stamps: the prefix and 256 random bits. */
const unstamped = (prefix: "mab_at_" | "mab_rt_") => randomToken(prefix);

describe("stamped tokens", () => {
  it("end with the time they were minted, and are stored under that stamp and their SHA-256, in creation order", async () => {
    const before = Date.now();
    const issued: string[] = [];
    for (let i = 0; i < 3; i++) {
      const tokens = await tokensFor(pub);
      const refreshed = (await refresh(pub, tokens.refresh_token)).json as Tokens;
      issued.push(tokens.access_token, tokens.refresh_token, refreshed.access_token, refreshed.refresh_token);
    }
    const after = Date.now();
    for (const token of issued) {
      expect(token).toMatch(/^mab_(at|rt)_[A-Za-z0-9_-]{43}[0-9a-f]{12}$/);
      const stamp = token.slice(-12);
      expect(parseInt(stamp, 16)).toBeGreaterThanOrEqual(before);
      expect(parseInt(stamp, 16)).toBeLessThanOrEqual(after);
      expect(hashPresentedToken(token)).toBe(stamp + sha256Hex(token));
    }
    const keys = [
      ...(await db().accessToken.findMany({ where: { clientId: pub.client_id }, orderBy: { createdAt: "asc" } })),
      ...(await db().refreshToken.findMany({ where: { clientId: pub.client_id }, orderBy: { createdAt: "asc" } })),
    ].map((row) => row.tokenHash);
    expect(new Set(keys)).toEqual(new Set(issued.map(hashPresentedToken)));
    // Later keys sort after earlier ones (keys starting with a hash would land anywhere).
    for (const table of [keys.slice(0, 6), keys.slice(6)]) expect([...table].sort()).toEqual(table);
  });
});

describe("who must not get in", () => {
  it("a token with its stamp changed, cut off, or moved is no token: refused at /mcp and /token", async () => {
    const tokens = await tokensFor(pub);
    const altered = (token: string) => {
      const stamp = token.slice(-12);
      const other = (BigInt(`0x${stamp}`) + 1n).toString(16).padStart(12, "0");
      return [token.slice(0, -12) + other, token.slice(0, -12), token.slice(0, 7) + stamp + token.slice(7, -12)];
    };
    for (const forged of altered(tokens.access_token)) expect(await mcpStatus(t.url, forged)).toBe(401);
    for (const forged of altered(tokens.refresh_token)) {
      const res = await refresh(pub, forged);
      expect({ status: res.status, error: res.json?.error }).toEqual({ status: 400, error: "invalid_grant" });
    }
    // The real ones still work: nothing above was taken for a use of them.
    expect(await mcpStatus(t.url, tokens.access_token)).toBe(200);
    expect((await refresh(pub, tokens.refresh_token)).status).toBe(200);
  });
});

describe("the key of a presented string", () => {
  it("has a stamp only for a token of ours of the stamped shape; anything else is keyed by its bare SHA-256", () => {
    const secret = "A".repeat(43);
    const stamp = "019ac3b2f0e1";
    for (const prefix of ["mab_at_", "mab_rt_", "mab_ac_"])
      expect(hashPresentedToken(prefix + secret + stamp)).toBe(stamp + sha256Hex(prefix + secret + stamp));
    for (const other of [
      `mab_at_${secret}`, // minted before stamps
      `mab_at_${secret}019AC3B2F0E1`, // not lowercase hex
      `mab_at_${secret}${stamp}0`, // too long
      `xyz_at_${secret}${stamp}`, // not our prefix
      `mab_at_${secret.slice(1)}${stamp}`, // too short
      "",
    ])
      expect(hashPresentedToken(other)).toBe(sha256Hex(other));
  });
});

describe("tokens stored before stamps", () => {
  it("still call /mcp, introspect, and are revoked", async () => {
    const tokens = await tokensFor(basic);
    const legacy = unstamped("mab_at_");
    await storeAsBeforeStamps("accessToken", tokens.access_token, legacy);
    expect(await mcpStatus(t.url, legacy)).toBe(200);
    // The stamped value it was issued as is no longer any token's.
    expect(await mcpStatus(t.url, tokens.access_token)).toBe(401);
    const asBasic = { authorization: basicAuth(basic.client_id, basic.client_secret!) };
    expect((await postForm(`${t.url}/introspect`, { token: legacy }, asBasic)).json).toMatchObject({ active: true, client_id: basic.client_id });
    expect((await postForm(`${t.url}/revoke`, { token: legacy }, asBasic)).status).toBe(200);
    expect(await mcpStatus(t.url, legacy)).toBe(401);
  });

  it("refresh to a stamped pair", async () => {
    const tokens = await tokensFor(pub);
    const legacy = unstamped("mab_rt_");
    await storeAsBeforeStamps("refreshToken", tokens.refresh_token, legacy);
    const res = await refresh(pub, legacy);
    expect(res.status).toBe(200);
    expect((res.json as Tokens).refresh_token).toMatch(/[0-9a-f]{12}$/);
    expect(await mcpStatus(t.url, (res.json as Tokens).access_token)).toBe(200);
  });

  it("a retry of a rotation stored before stamps gets that rotation's pair back, and the grant goes on", async () => {
    const tokens = await tokensFor(pub);
    const rotated = (await refresh(pub, tokens.refresh_token)).json as Tokens;
    // Rewrite the rotation as the broker stored it before stamps: the presented token, its derived
    // successor and the derived access token, each under its bare SHA-256.
    const presented = unstamped("mab_rt_");
    const rotationKey = purposeKey(secretKey, "refresh-rotation/v1");
    const pair = deriveSuccessorPairOfTwoMacs(rotationKey, presented, null);
    await storeAsBeforeStamps("refreshToken", tokens.refresh_token, presented);
    await storeAsBeforeStamps("refreshToken", rotated.refresh_token, pair.successor.value);
    await storeAsBeforeStamps("accessToken", rotated.access_token, pair.access.value);

    const retried = await refresh(pub, presented);
    expect(retried.status).toBe(200);
    expect(retried.json).toMatchObject({ access_token: pair.access.value, refresh_token: pair.successor.value });
    // Not taken for reuse: the successor still rotates.
    const next = await refresh(pub, pair.successor.value);
    expect(next.status).toBe(200);
    expect(await mcpStatus(t.url, (next.json as Tokens).access_token)).toBe(200);
  });
});

describe("rotations derived with one HMAC per token (before one HMAC per pair)", () => {
  it("a retry gets that rotation's pair back, and the grant goes on", async () => {
    const tokens = await tokensFor(pub);
    const rotated = (await refresh(pub, tokens.refresh_token)).json as Tokens;
    // Rewrite the rotation as the version before stored it: the same stamp, each token of the pair
    // its own HMAC-SHA256 of the presented token.
    const rotationKey = purposeKey(secretKey, "refresh-rotation/v1");
    const pair = deriveSuccessorPairOfTwoMacs(rotationKey, tokens.refresh_token, rotated.refresh_token.slice(-12));
    await db().refreshToken.update({ where: { tokenHash: hashPresentedToken(rotated.refresh_token) }, data: { tokenHash: pair.successor.hash } });
    await db().accessToken.update({ where: { tokenHash: hashPresentedToken(rotated.access_token) }, data: { tokenHash: pair.access.hash } });

    const retried = await refresh(pub, tokens.refresh_token);
    expect(retried.status).toBe(200);
    expect(retried.json).toMatchObject({ access_token: pair.access.value, refresh_token: pair.successor.value });
    expect(await mcpStatus(t.url, pair.access.value)).toBe(200);
    const next = await refresh(pub, pair.successor.value);
    expect(next.status).toBe(200);
    expect(await mcpStatus(t.url, (next.json as Tokens).access_token)).toBe(200);
  });
});
