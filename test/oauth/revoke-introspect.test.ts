// /revoke (RFC 7009) and /introspect (RFC 7662) over HTTP.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { hashPresentedToken } from "../../src/grants/token-format.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { mcpStatus as probeMcp } from "../support/mcp-probe.ts";
import { basicAuth, postForm, registerClientSet, send, tokensThroughFlow, type HttpResult, type TestClient, type TokenPair } from "../support/oauth-client.ts";

let t: TestBroker;
let pub: TestClient;
let basic: TestClient;
let post: TestClient;
let other: TestClient;
beforeAll(async () => {
  t = await startBroker({ TRUST_PROXY: "true" });
  ({ pub, basic, post, machine: other } = await registerClientSet(t.url, t.broker.database.db));
});
afterAll(async () => t.stop());

type Tokens = TokenPair;
/** Tokens for `client` through the whole flow (login as `user`), authenticated by the client's method. */
const tokensFor = (client: TestClient, user = "alice"): Promise<Tokens> => tokensThroughFlow(t.url, client, user);
const asBasic = (c: TestClient) => ({ authorization: basicAuth(c.client_id, c.client_secret!) });
const revoke = (form: Record<string, string>, headers: Record<string, string> = {}) => postForm(`${t.url}/revoke`, form, headers);
const introspect = (form: Record<string, string>, headers: Record<string, string> = {}) => postForm(`${t.url}/introspect`, form, headers);

/** Status of an MCP initialize call with this access token. */
const mcpStatus = (accessToken: string) => probeMcp(t.url, accessToken);

function expectOk(res: HttpResult): void {
  expect(res.status).toBe(200);
  expect(res.text).toBe("");
  expect(res.headers.get("cache-control")).toBe("no-store");
}

function expectError(res: HttpResult, error: string, status: number): void {
  expect({ status: res.status, error: res.json?.error }).toEqual({ status, error });
  expect(res.json!.error_description).toEqual(expect.any(String));
  if (error === "invalid_client") expect(res.headers.get("www-authenticate")).toBe('Basic realm="mcp-auth-broker"');
}

describe("/revoke", () => {
  it("authenticates the client by its registered method", async () => {
    expectError(await revoke({ token: "x" }), "invalid_client", 401);
    expectError(await revoke({ token: "x", client_id: "mab_c_unknown000000000000000" }), "invalid_client", 401);
    expectError(await revoke({ token: "x", client_id: basic.client_id }), "invalid_client", 401);
    expectError(await revoke({ token: "x" }, { authorization: basicAuth(basic.client_id, "wrong") }), "invalid_client", 401);
    expectError(await revoke({ token: "x", client_id: post.client_id, client_secret: post.client_secret! }, asBasic(basic)), "invalid_client", 401);
    expectOk(await revoke({ token: "x", client_id: post.client_id, client_secret: post.client_secret! }));
    expectOk(await revoke({ token: "x" }, asBasic(basic)));
  });

  it("wants a token, form-encoded", async () => {
    expectError(await revoke({ client_id: pub.client_id }), "invalid_request", 400);
    expectError(await revoke({ client_id: pub.client_id, token: "" }), "invalid_request", 400);
    const json = await send(`${t.url}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token: "x", client_id: pub.client_id }),
    });
    expectError(json, "invalid_request", 400);
  });

  it("answers 200 for unknown tokens", async () => {
    expectOk(await revoke({ token: "mab_at_unknown", client_id: pub.client_id }));
    expectOk(await revoke({ token: "not even a token", client_id: pub.client_id, token_type_hint: "refresh_token" }));
  });

  it("revokes an access token (a public client, by client_id)", async () => {
    const tokens = await tokensFor(pub);
    expect(await mcpStatus(tokens.access_token)).toBe(200);
    expectOk(await revoke({ token: tokens.access_token, client_id: pub.client_id, token_type_hint: "access_token" }));
    expect(await mcpStatus(tokens.access_token)).toBe(401);
  });

  it("ends the whole grant when a refresh token is revoked: the refresh token and its access tokens die", async () => {
    const tokens = await tokensFor(pub);
    expectOk(await revoke({ token: tokens.refresh_token, client_id: pub.client_id }));
    expect(await mcpStatus(tokens.access_token)).toBe(401);
    const refresh = await postForm(`${t.url}/token`, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: pub.client_id });
    expectError(refresh, "invalid_grant", 400);
  });

  it("ignores token_type_hint values it does not know, and a wrong hint", async () => {
    const a = await tokensFor(pub);
    expectOk(await revoke({ token: a.access_token, client_id: pub.client_id, token_type_hint: "something_else" }));
    expect(await mcpStatus(a.access_token)).toBe(401);
    const b = await tokensFor(pub);
    expectOk(await revoke({ token: b.refresh_token, client_id: pub.client_id, token_type_hint: "access_token" }));
    expect(await mcpStatus(b.access_token)).toBe(401);
  });

  it("lets a client revoke only its own tokens (another client's: 200, nothing happens)", async () => {
    const tokens = await tokensFor(pub);
    expectOk(await revoke({ token: tokens.access_token, client_id: post.client_id, client_secret: post.client_secret! }));
    expectOk(await revoke({ token: tokens.refresh_token }, asBasic(basic)));
    expect(await mcpStatus(tokens.access_token)).toBe(200);
    const refreshed = await postForm(`${t.url}/token`, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: pub.client_id });
    expect(refreshed.status).toBe(200);
  });
});

describe("/introspect", () => {
  it("is for confidential clients only", async () => {
    const tokens = await tokensFor(pub);
    expectError(await introspect({ token: tokens.access_token, client_id: pub.client_id }), "invalid_client", 401);
    expectError(await introspect({ token: tokens.access_token }), "invalid_client", 401);
    expectError(await introspect({ token: tokens.access_token }, { authorization: basicAuth(basic.client_id, "wrong") }), "invalid_client", 401);
  });

  it("wants a token", async () => {
    expectError(await introspect({}, asBasic(basic)), "invalid_request", 400);
  });

  it("describes an active access token of the client", async () => {
    const tokens = await tokensFor(basic, "bob");
    const res = await introspect({ token: tokens.access_token }, asBasic(basic));
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const now = Math.floor(Date.now() / 1000);
    expect(res.json).toMatchObject({
      active: true,
      scope: "mcp",
      client_id: basic.client_id,
      sub: "demo:bob",
      aud: `${t.url}/mcp`,
      token_type: "Bearer",
    });
    expect(res.json!.iat as number).toBeLessThanOrEqual(now + 1);
    expect(res.json!.exp as number).toBeGreaterThan(now);
  });

  it("describes a refresh token (client_secret_post)", async () => {
    const tokens = await tokensFor(post);
    const res = await introspect({ token: tokens.refresh_token, client_id: post.client_id, client_secret: post.client_secret! });
    expect(res.json).toMatchObject({ active: true, client_id: post.client_id, token_type: "refresh_token", sub: "demo:alice", aud: `${t.url}/mcp` });
  });

  it("describes a client_credentials token", async () => {
    const issued = await postForm(`${t.url}/token`, { grant_type: "client_credentials" }, asBasic(other));
    const res = await introspect({ token: issued.json!.access_token as string }, asBasic(other));
    // RFC 7662 sub: the resource owner, here the machine client itself; there is no user name.
    expect(res.json).toMatchObject({ active: true, client_id: other.client_id, token_type: "Bearer", sub: `client:${other.client_id}` });
    expect(res.json).not.toHaveProperty("username");
  });

  it("says only {active:false} for revoked, expired, foreign and unknown tokens", async () => {
    const revoked = await tokensFor(basic);
    expectOk(await revoke({ token: revoked.refresh_token }, asBasic(basic)));
    const expired = await tokensFor(basic);
    await t.broker.database.db.accessToken.update({
      where: { tokenHash: hashPresentedToken(expired.access_token) },
      data: { expiresAt: new Date(Date.now() - 1000) },
    });
    const foreign = await tokensFor(post);
    const cases = [revoked.access_token, revoked.refresh_token, foreign.access_token, foreign.refresh_token, "mab_at_unknown", "garbage"];
    for (const token of cases) {
      const res = await introspect({ token }, asBasic(basic));
      expect({ token: token.slice(0, 12), status: res.status, body: res.json }).toEqual({ token: token.slice(0, 12), status: 200, body: { active: false } });
    }
    const exp = await introspect({ token: expired.access_token }, asBasic(basic));
    expect(exp.json).toEqual({ active: false });
  });
});
