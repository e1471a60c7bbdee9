// X-Auth-Assertion through a real broker: the recording MCP server (SDK v2) receives with every
// request a JWT the broker signed, and verifies it with `jose` against the broker's published
// keys, as the README shows. A forged assertion (another key under the same kid), one the client
// tried to send itself, one for another server and an expired one all fail that verification; a
// key rotation keeps the last key's assertions verifiable until they expire.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createRemoteJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, jwtVerify, SignJWT, type JWTPayload } from "jose";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { INITIALIZE_MESSAGE, mcpPostTo } from "../support/mcp-probe.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { ManualClock } from "../../src/lib/clock.ts";

let server: V2McpServer;
let t: TestBroker;
const clock = new ManualClock();
beforeAll(async () => {
  server = await startV2McpServer();
  t = await startBroker({ MCP_SERVER_URL: server.url }, { clock });
});
afterAll(async () => {
  await t?.stop();
  await server?.close();
});

/** What the server does with what it received: the README's five lines. */
async function verify(assertion: string, at = clock.now(), audience = `${t.url}/mcp`): Promise<JWTPayload> {
  const keys = createRemoteJWKSet(new URL(`${t.url}/.well-known/jwks.json`));
  const { payload } = await jwtVerify(assertion, keys, { issuer: t.url, audience, algorithms: ["ES256"], currentDate: new Date(at) });
  return payload;
}

/** Sends initialize as `user` (with `headers`), and returns the assertion the MCP server received. */
async function assertionReceived(user: string, headers: Record<string, string> = {}): Promise<string> {
  const { tokens } = await obtainTokens(t.url, { user });
  const before = server.requests.length;
  const res = await mcpPostTo(`${t.url}/mcp`, tokens.access_token, INITIALIZE_MESSAGE, headers);
  expect(res.status).toBe(200);
  await res.body?.cancel();
  const received = server.requests.slice(before).map((r) => r.headers["x-auth-assertion"]);
  expect(received).toHaveLength(1);
  expect(typeof received[0]).toBe("string");
  return received[0] as string;
}

describe("X-Auth-Assertion", () => {
  it("names the user, the client and the scopes, for this server, for 60 seconds, signed by a published key", async () => {
    const payload = await verify(await assertionReceived("ada"));
    expect(payload).toMatchObject({ iss: t.url, aud: `${t.url}/mcp`, sub: "demo:ada", login: "ada", scope: expect.stringContaining("mcp") });
    expect(typeof payload.client_id).toBe("string");
    expect(payload.exp! - payload.iat!).toBe(60);
    const jwks = (await (await fetch(`${t.url}/.well-known/jwks.json`)).json()) as { keys: Array<Record<string, unknown>> };
    expect(jwks.keys.every((k) => k.d === undefined && k.alg === "ES256")).toBe(true);
  });

  it("one the client sends itself never reaches the server: the server gets the broker's", async () => {
    const { privateKey } = await generateKeyPair("ES256");
    const forged = await new SignJWT({ login: "root" })
      .setProtectedHeader({ alg: "ES256" })
      .setIssuer(t.url)
      .setAudience(`${t.url}/mcp`)
      .setSubject("demo:root")
      .setExpirationTime("1m")
      .sign(privateKey);
    const received = await assertionReceived("bo", { "x-auth-assertion": forged });
    expect(received).not.toBe(forged);
    expect((await verify(received)).sub).toBe("demo:bo");
  });

  it("a forged one (another key under the broker's kid), one for another server, and an expired one fail verification", async () => {
    const real = await assertionReceived("cy");
    const { kid } = decodeProtectedHeader(real);
    const { privateKey } = await generateKeyPair("ES256", { extractable: true });
    expect(await exportJWK(privateKey)).toHaveProperty("d");
    const forged = await new SignJWT({ login: "cy" })
      .setProtectedHeader({ alg: "ES256", kid: kid! })
      .setIssuer(t.url)
      .setAudience(`${t.url}/mcp`)
      .setSubject("demo:cy")
      .setIssuedAt()
      .setExpirationTime("1m")
      .sign(privateKey);
    await expect(verify(forged)).rejects.toMatchObject({ code: "ERR_JWS_SIGNATURE_VERIFICATION_FAILED" });
    await expect(verify(real, clock.now(), `${t.url}/mcp/other`)).rejects.toMatchObject({ code: "ERR_JWT_CLAIM_VALIDATION_FAILED", claim: "aud" });
    await expect(verify(real, clock.now() + 61_000)).rejects.toMatchObject({ code: "ERR_JWT_EXPIRED" });
  });

  it("a key rotation keeps the last key's assertions verifiable until they expire", async () => {
    const PERIOD = 30 * 24 * 3_600_000;
    // Just before the next period starts: the key about to sign is already published.
    clock.advance(Math.ceil(clock.now() / PERIOD) * PERIOD - 30_000 - clock.now());
    const before = await assertionReceived("dee");
    clock.advance(31_000);
    const after = await assertionReceived("dee");
    expect(decodeProtectedHeader(after).kid).not.toBe(decodeProtectedHeader(before).kid);
    expect((await verify(before)).sub).toBe("demo:dee");
    expect((await verify(after)).sub).toBe("demo:dee");
  });
});
