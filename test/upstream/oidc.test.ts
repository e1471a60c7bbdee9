// OidcProvider (and the Google preset) against a real OpenID Connect issuer on 127.0.0.1: the
// demo identity provider, which is oidc-provider with introspection, revocation and refresh.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { OidcProvider } from "../../src/upstream/oidc.ts";
import { createUpstreamProvider } from "../../src/upstream/create.ts";
import { startDemoIdentityProvider, type StandaloneDemoIdentityProvider } from "../../src/demo/identity-provider.ts";
import { toCheck, UpstreamError, type UpstreamProvider } from "../../src/upstream/provider.ts";
import { loginWithoutBrowser } from "../support/oidc-login.ts";

const REDIRECT = "http://127.0.0.1:9/oauth/callback";
let idp: StandaloneDemoIdentityProvider;

function oidc(overrides: Partial<ConstructorParameters<typeof OidcProvider>[0]> = {}) {
  return new OidcProvider({
    kind: "oidc",
    displayName: "Test IdP",
    issuer: idp.url,
    clientId: "broker",
    clientSecret: "broker-secret",
    scopes: "openid email profile",
    timeoutMs: 1000,
    offline: true,
    ...overrides,
  });
}

async function signIn(p: UpstreamProvider, user: string) {
  const request = await p.createAuthorizationRequest(REDIRECT);
  const callbackUrl = await loginWithoutBrowser(request.url, user, REDIRECT);
  const tokens = await p.exchangeCode(
    { callbackUrl, expectedState: request.state, expectedNonce: request.nonce, codeVerifier: request.codeVerifier },
    REDIRECT,
  );
  return { request, callbackUrl, tokens };
}

beforeAll(async () => {
  idp = await startDemoIdentityProvider({
    clients: [{ client_id: "broker", client_secret: "broker-secret", redirect_uris: [REDIRECT] }],
    cookieKeys: ["k1"],
    accessTokenTtlSeconds: 60,
  });
});
afterAll(async () => idp.close());

describe("OidcProvider", () => {
  it("verifies its client credentials without a user: right ones pass, a wrong secret or an unreachable issuer say so", async () => {
    await expect(oidc().verifyCredentials(REDIRECT)).resolves.toBeUndefined();
    await expect(oidc({ clientSecret: "wrong" }).verifyCredentials(REDIRECT)).rejects.toMatchObject({ kind: "misconfigured" });
    await expect(oidc({ issuer: "http://127.0.0.1:1/nowhere" }).verifyCredentials(REDIRECT)).rejects.toMatchObject({ kind: "unavailable" });
  });

  it("logs in with PKCE, state and nonce, validates the ID token and reads the identity", async () => {
    const p = oidc();
    const { request, tokens } = await signIn(p, "alice");
    const url = new URL(request.url);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    expect(url.searchParams.get("nonce")).toBe(request.nonce);
    expect(url.searchParams.get("scope")).toContain("offline_access");
    expect(tokens.idToken).toBeDefined();
    expect(tokens.refreshToken).toBeDefined();
    const identity = await p.fetchIdentity(tokens);
    expect(identity).toMatchObject({ subject: "oidc:alice", login: "alice", email: "alice@demo.invalid" });
    expect(await p.check(toCheck(tokens))).toMatchObject({ status: "active" });
  });

  it("takes identity only from the ID token claims it validated, never from a token string it was handed", async () => {
    const p = oidc();
    const { tokens } = await signIn(p, "carol");
    expect(tokens.idTokenClaims).toMatchObject({ sub: "carol", iss: idp.url, aud: "broker" });
    // The validated claims carry the identity even when userinfo refuses the access token.
    expect(await p.fetchIdentity({ ...tokens, accessToken: "not-an-access-token" })).toMatchObject({ subject: "oidc:carol" });
    // An ID token nobody validated (here: made up) names no one; userinfo has the last word.
    const payload = Buffer.from(JSON.stringify({ iss: idp.url, aud: "broker", sub: "mallory" })).toString("base64url");
    const forged = { accessToken: "not-an-access-token", idToken: `eyJhbGciOiJub25lIn0.${payload}.` };
    await expect(p.fetchIdentity(forged)).rejects.toBeInstanceOf(UpstreamError);
  });

  it("the Google preset asks for offline access and prefixes google:", async () => {
    const p = createUpstreamProvider({
      provider: "google",
      clientId: "broker",
      clientSecret: "broker-secret",
      scopes: undefined,
      issuer: idp.url,
      displayName: undefined,
      githubUrl: "",
      githubApiUrl: "",
      timeoutMs: 1000,
    });
    expect(p.displayName).toBe("Google");
    const { request, tokens } = await signIn(p, "bob");
    const url = new URL(request.url);
    expect(url.searchParams.get("access_type")).toBe("offline");
    expect(url.searchParams.get("prompt")).toBe("consent");
    expect((await p.fetchIdentity(tokens)).subject).toBe("google:bob");
  });

  it("refuses a wrong state and a wrong nonce", async () => {
    const p = oidc();
    const request = await p.createAuthorizationRequest(REDIRECT);
    const callbackUrl = await loginWithoutBrowser(request.url, "carol", REDIRECT);
    await expect(
      p.exchangeCode({ callbackUrl, expectedState: "nope", expectedNonce: request.nonce, codeVerifier: request.codeVerifier }, REDIRECT),
    ).rejects.toMatchObject({ kind: "protocol" });
    const second = await p.createAuthorizationRequest(REDIRECT);
    const cb2 = await loginWithoutBrowser(second.url, "carol", REDIRECT);
    await expect(
      p.exchangeCode({ callbackUrl: cb2, expectedState: second.state, expectedNonce: "wrong-nonce", codeVerifier: second.codeVerifier }, REDIRECT),
    ).rejects.toMatchObject({ kind: "protocol" });
  });

  it("sees upstream revocation, refreshes with rotation, and revokes", async () => {
    const p = oidc();
    const { tokens } = await signIn(p, "dave");
    const fresh = await p.refresh(tokens);
    expect(fresh.accessToken).not.toBe(tokens.accessToken);
    expect(await p.check(toCheck(fresh))).toMatchObject({ status: "active" });
    await p.revoke(fresh);
    expect(await p.check(toCheck({ ...fresh, refreshToken: undefined }))).toMatchObject({ status: "invalid" });
    const other = await signIn(p, "erin");
    await idp.revokeSubject("erin");
    expect(await p.check(toCheck({ ...other.tokens, refreshToken: undefined }))).toMatchObject({ status: "invalid" });
    await expect(p.refresh(other.tokens)).rejects.toMatchObject({ kind: "invalid_grant" });
  });

  it("reports an outage, and a wrong client secret with an actionable message", async () => {
    const p = oidc();
    const { tokens } = await signIn(p, "frank");
    idp.setOutage(true);
    try {
      await expect(p.check(toCheck(tokens))).rejects.toMatchObject({ kind: "unavailable" });
    } finally {
      idp.setOutage(false);
    }
    const wrong = oidc({ clientSecret: "not-the-secret" });
    const err = (await wrong.refresh(tokens).catch((e: unknown) => e)) as Error & { kind: string };
    expect(err.kind).toBe("misconfigured");
    expect(err.message).toMatch(/UPSTREAM_CLIENT_SECRET/);
    expect(err.message).not.toContain("not-the-secret");
  });

  it("says which issuer it cannot reach", async () => {
    const p = oidc({ issuer: "http://127.0.0.1:1" });
    await expect(p.createAuthorizationRequest(REDIRECT)).rejects.toMatchObject({ kind: "unavailable", message: expect.stringMatching(/UPSTREAM_ISSUER/) });
  });
});
