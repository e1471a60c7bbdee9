// OAuth2Provider (a plain OAuth 2.0 service configured by URLs) against the OAuth 2 emulator over
// real HTTP: the code flow with PKCE, identity from a userinfo URL, refresh with rotation, checks,
// RFC 7009 revocation, client authentication, and who must not get a token.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { OAuth2Provider, type OAuth2ProviderOptions } from "../../src/upstream/oauth2.ts";
import { toCheck, type UpstreamError } from "../../src/upstream/provider.ts";
import { s256Challenge } from "../../src/crypto/pkce.ts";
import { startOAuth2Emulator, type CannedAnswer, type OAuth2Emulator } from "../support/oauth2-emulator.ts";

const REDIRECT = "http://127.0.0.1:9/oauth/connect/callback";
/** Registered at the emulator too: a code issued for it must not be redeemable for REDIRECT. */
const OTHER_REDIRECT = "http://127.0.0.1:9/elsewhere/callback";
// Characters that change under form-urlencoding (space, +, /, %, :): a Basic header built without
// RFC 6749 §2.3.1's encoding carries another secret.
const SECRET = "s3cret +/%:value";

let server: OAuth2Emulator;
/** A service that takes the credentials only as form fields (as Linear and Atlassian document). */
let postOnly: OAuth2Emulator;

function provider(overrides: Partial<OAuth2ProviderOptions> = {}, at: OAuth2Emulator = server): OAuth2Provider {
  return new OAuth2Provider({
    displayName: "Example Service",
    authorizeUrl: at.authorizeUrl,
    tokenUrl: at.tokenUrl,
    revokeUrl: at.revokeUrl,
    userinfoUrl: at.userinfoUrl,
    clientId: "broker-client",
    clientSecret: SECRET,
    scopes: "read write",
    timeoutMs: 1000,
    ...overrides,
  });
}

/** Follows the authorization URL as a browser would, the emulator approving at once as `user`. */
async function authorize(p: OAuth2Provider, user: string, redirectUri = REDIRECT, at: OAuth2Emulator = server) {
  at.nextUser = user;
  try {
    const request = await p.createAuthorizationRequest(redirectUri);
    const res = await fetch(request.url, { redirect: "manual" });
    expect(res.status).toBe(302);
    return { request, callbackUrl: new URL(res.headers.get("location")!) };
  } finally {
    at.nextUser = null;
  }
}

async function connect(p: OAuth2Provider, user: string, at: OAuth2Emulator = server) {
  const { request, callbackUrl } = await authorize(p, user, REDIRECT, at);
  return p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT);
}

beforeAll(async () => {
  server = await startOAuth2Emulator({ clientId: "broker-client", clientSecret: SECRET, redirectUris: [REDIRECT, OTHER_REDIRECT] });
  postOnly = await startOAuth2Emulator({
    clientId: "broker-client",
    clientSecret: SECRET,
    redirectUris: [REDIRECT],
    clientAuth: ["client_secret_post"],
  });
});
afterAll(async () => {
  await server.close();
  await postOnly.close();
});

describe("OAuth2Provider: the authorization request", () => {
  it("asks for a code with PKCE S256, a 256-bit state, the scopes and the extra parameters, and no nonce", async () => {
    const p = provider({
      authorizeUrl: `${server.authorizeUrl}?audience=api.example`,
      extraAuthorizationParams: { prompt: "consent" },
    });
    const request = await p.createAuthorizationRequest(REDIRECT);
    const url = new URL(request.url);
    expect(url.origin + url.pathname).toBe(server.authorizeUrl);
    expect(Object.fromEntries(url.searchParams)).toEqual({
      audience: "api.example",
      prompt: "consent",
      response_type: "code",
      client_id: "broker-client",
      redirect_uri: REDIRECT,
      scope: "read write",
      state: request.state,
      code_challenge: s256Challenge(request.codeVerifier),
      code_challenge_method: "S256",
    });
    expect(Buffer.from(request.state, "base64url")).toHaveLength(32);
    expect(Buffer.from(request.codeVerifier, "base64url")).toHaveLength(32);
    expect(request.nonce).toBeUndefined();
    const again = await p.createAuthorizationRequest(REDIRECT);
    expect(again.state).not.toBe(request.state);
    expect(again.codeVerifier).not.toBe(request.codeVerifier);
  });
});

describe("OAuth2Provider: the code flow", () => {
  it("exchanges the code (client_secret_basic, form-encoded secret) and names the account from the userinfo URL", async () => {
    const p = provider({ kind: "example" });
    const before = server.count("token:authorization_code");
    const tokens = await connect(p, "alice");
    expect(server.count("token:authorization_code")).toBe(before + 1);
    expect(tokens.accessToken).toMatch(/^at_/);
    expect(tokens.refreshToken).toMatch(/^rt_/);
    expect(tokens.scope).toBe("read write");
    expect(tokens.accessExpiresAt!.getTime()).toBeGreaterThan(Date.now() + 3000_000);
    const alice = server.user("alice");
    expect(await p.fetchIdentity(tokens)).toEqual({
      subject: `example:${alice.id}`,
      login: "alice",
      email: alice.email,
      name: undefined,
      profile: { id: alice.id, login: "alice", email: alice.email },
      // Plain OAuth 2 proves no address: nothing counts for e-mail rules.
      verifiedEmails: [],
      memberships: [],
    });
    expect(await p.check(toCheck(tokens))).toEqual({ status: "active" });
  });

  it("lets a browser pick the account on the emulator's page, and a refusal there is `denied`", async () => {
    const p = provider();
    const request = await p.createAuthorizationRequest(REDIRECT);
    const page = await fetch(request.url, { redirect: "manual" });
    expect(page.status).toBe(200);
    const html = await page.text();
    const links = new Map([...html.matchAll(/<a href="([^"]+)">([^<]+)<\/a>/g)].map((m) => [m[2]!, new URL(m[1]!.replaceAll("&#38;", "&"), server.url)]));
    const href = (label: string): URL => links.get(label)!;
    const approved = await fetch(href("Continue as bob"), { redirect: "manual" });
    const callbackUrl = new URL(approved.headers.get("location")!);
    const tokens = await p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT);
    expect((await p.fetchIdentity(tokens)).login).toBe("bob");

    const denied = await fetch(href("Deny"), { redirect: "manual" });
    const deniedUrl = new URL(denied.headers.get("location")!);
    await expect(p.exchangeCode({ callbackUrl: deniedUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT)).rejects.toMatchObject({
      kind: "denied",
    });
  });

  it("maps the provider's other callback errors and a callback without a code", async () => {
    const p = provider();
    const callback = (query: string) => p.exchangeCode({ callbackUrl: new URL(`${REDIRECT}?${query}`), expectedState: "s", codeVerifier: "v" }, REDIRECT);
    await expect(callback("error=temporarily_unavailable&state=s")).rejects.toMatchObject({ kind: "unavailable" });
    await expect(callback("error=unauthorized_client&state=s")).rejects.toMatchObject({ kind: "misconfigured" });
    await expect(callback("error=invalid_scope&state=s")).rejects.toMatchObject({ kind: "protocol" });
    await expect(callback("state=s")).rejects.toMatchObject({ kind: "protocol", message: expect.stringContaining("no code") });
  });

  it("leaves the scope unknown when the token answer has none, and keeps it across a refresh without one", async () => {
    server.scopeInAnswers = false;
    try {
      const p = provider();
      const tokens = await connect(p, "alice");
      expect(tokens.scope).toBeUndefined();
      const withScope = { ...tokens, scope: "read" };
      expect((await p.refresh(withScope)).scope).toBe("read");
    } finally {
      server.scopeInAnswers = true;
    }
  });

  it("names the account by the configured fields, and refuses an answer without the subject field", async () => {
    const tokens = await connect(provider(), "carol");
    const carol = server.user("carol");
    expect(await provider({ subjectField: "login", loginField: "email" }).fetchIdentity(tokens)).toMatchObject({
      subject: "oauth2:carol",
      login: carol.email,
    });
    await expect(provider({ subjectField: "user.id" }).fetchIdentity(tokens)).rejects.toMatchObject({
      kind: "protocol",
      message: expect.stringContaining("user.id"),
    });
  });

  it("without a userinfo URL: an account without a name, and a token good until it expires", async () => {
    const p = provider({ userinfoUrl: undefined });
    const tokens = await connect(p, "alice");
    const calls = server.count("userinfo");
    expect(await p.fetchIdentity(tokens)).toEqual({ subject: "oauth2:unknown", login: "", profile: {}, verifiedEmails: [], memberships: [] });
    server.revokeUser("alice");
    // Nothing to ask: the token counts until its expiry.
    expect(await p.check(toCheck(tokens))).toEqual({ status: "active" });
    expect(await p.check({ ...toCheck(tokens), accessExpiresAt: new Date(Date.now() - 1) })).toEqual({ status: "expired" });
    expect(server.count("userinfo")).toBe(calls);
  });
});

describe("OAuth2Provider: who must not get a token", () => {
  it("refuses a callback whose state is not the one it sent, before spending the code", async () => {
    const p = provider();
    const { request, callbackUrl } = await authorize(p, "alice");
    const exchanges = server.count("token:authorization_code");
    await expect(p.exchangeCode({ callbackUrl, expectedState: "another-state", codeVerifier: request.codeVerifier }, REDIRECT)).rejects.toMatchObject({
      kind: "protocol",
    });
    // A forged "the user refused" with the wrong state is a forgery, not a refusal.
    const forged = new URL(`${REDIRECT}?error=access_denied&state=forged`);
    await expect(p.exchangeCode({ callbackUrl: forged, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT)).rejects.toMatchObject({
      kind: "protocol",
    });
    expect(server.count("token:authorization_code")).toBe(exchanges);
    // The code was never sent: the right callback still works.
    await expect(p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT)).resolves.toMatchObject({
      accessToken: expect.stringMatching(/^at_/),
    });
  });

  it("sends the PKCE verifier: a code redeemed with another verifier is refused, so a stolen code alone is worthless", async () => {
    const p = provider();
    const { request, callbackUrl } = await authorize(p, "alice");
    const thief = await p.createAuthorizationRequest(REDIRECT);
    await expect(p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: thief.codeVerifier }, REDIRECT)).rejects.toMatchObject({
      kind: "invalid_grant",
      message: expect.stringContaining("invalid_grant"),
    });
  });

  it("a code issued for another redirect URI is refused, and an unregistered redirect URI gets no code at all", async () => {
    const p = provider();
    const { request, callbackUrl } = await authorize(p, "alice", OTHER_REDIRECT);
    await expect(p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT)).rejects.toMatchObject({
      kind: "invalid_grant",
    });
    server.nextUser = "alice";
    try {
      const unregistered = await p.createAuthorizationRequest("http://127.0.0.1:9/attacker/callback");
      const res = await fetch(unregistered.url, { redirect: "manual" });
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
    } finally {
      server.nextUser = null;
    }
  });
});

describe("OAuth2Provider: client authentication", () => {
  it("verifies the credentials without a user: right ones pass, a wrong secret is `misconfigured` and says what to fix", async () => {
    await expect(provider().verifyCredentials(REDIRECT)).resolves.toBeUndefined();
    const err = (await provider({ clientSecret: "wrong-secret-value" })
      .verifyCredentials(REDIRECT)
      .catch((e: unknown) => e)) as UpstreamError;
    expect(err).toMatchObject({ kind: "misconfigured", message: expect.stringContaining("client id and secret") });
    expect(err.message).not.toContain("wrong-secret-value");
    await expect(provider({ tokenUrl: "http://127.0.0.1:1/token" }).verifyCredentials(REDIRECT)).rejects.toMatchObject({ kind: "unavailable" });
  });

  it("a wrong secret at the code exchange is `misconfigured`, not the user's fault", async () => {
    const p = provider({ clientSecret: "wrong-secret-value" });
    const { request, callbackUrl } = await authorize(p, "alice");
    await expect(p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT)).rejects.toMatchObject({
      kind: "misconfigured",
    });
  });

  it("talks to a service that wants client_secret_post when told so, and names the other method when it is refused", async () => {
    const basic = provider({}, postOnly);
    await expect(basic.verifyCredentials(REDIRECT)).rejects.toMatchObject({
      kind: "misconfigured",
      message: expect.stringContaining("client_secret_post"),
    });
    const post = provider({ tokenAuth: "client_secret_post" }, postOnly);
    await expect(post.verifyCredentials(REDIRECT)).resolves.toBeUndefined();
    const tokens = await connect(post, "alice", postOnly);
    const fresh = await post.refresh(tokens);
    await post.revoke(fresh);
    expect(postOnly.liveTokenCount("alice")).toBe(0);
  });
});

describe("OAuth2Provider: answers of other shapes", () => {
  /** The endpoint answers `answer` while `run` runs. */
  async function answering<T>(path: string, answer: CannedAnswer, run: () => Promise<T>): Promise<T> {
    server.answerWith(path, answer);
    try {
      return await run();
    } finally {
      server.answerWith(path, null);
    }
  }
  const JSON_TYPE = "application/json";

  it("reads a form-encoded token answer and an error sent with 200, as older servers send them", async () => {
    const p = provider();
    const tokens = await answering(
      "/token",
      { status: 200, contentType: "application/x-www-form-urlencoded", body: "access_token=at_form&expires_in=60&scope=read" },
      () => p.refresh({ accessToken: "old", refreshToken: "rt_any" }),
    );
    expect(tokens).toMatchObject({ accessToken: "at_form", refreshToken: "rt_any", scope: "read" });
    await expect(
      answering("/token", { status: 200, contentType: JSON_TYPE, body: '{"error":"invalid_grant"}' }, () => p.refresh({ accessToken: "a", refreshToken: "r" })),
    ).rejects.toMatchObject({ kind: "invalid_grant" });
  });

  it("a 401 without a body at the token endpoint is the client's credentials, not the user's token", async () => {
    await expect(answering("/token", { status: 401 }, () => provider().verifyCredentials(REDIRECT))).rejects.toMatchObject({
      kind: "misconfigured",
    });
  });

  it("an answer that is no token response, or a userinfo answer that is no object, breaks the protocol", async () => {
    const p = provider();
    await expect(
      answering("/token", { status: 200, contentType: "text/html", body: "<html>login</html>" }, () => p.refresh({ accessToken: "a", refreshToken: "r" })),
    ).rejects.toMatchObject({ kind: "protocol" });
    await expect(
      answering("/userinfo", { status: 200, contentType: JSON_TYPE, body: "[1]" }, () => p.fetchIdentity({ accessToken: "a" })),
    ).rejects.toMatchObject({
      kind: "protocol",
    });
    // A 403 says nothing about whether the token lives: no verdict, an error to look at.
    await expect(answering("/userinfo", { status: 403 }, () => p.check({ accessToken: "a", refreshable: false }))).rejects.toMatchObject({
      kind: "protocol",
    });
  });
});

describe("OAuth2Provider: keeping the token alive", () => {
  it("refreshes with rotation: new tokens, and the spent refresh token is refused", async () => {
    const p = provider();
    const tokens = await connect(p, "dave");
    expect(p.canRefresh(tokens)).toBe(true);
    const refreshes = server.count("token:refresh_token");
    const fresh = await p.refresh(tokens);
    expect(server.count("token:refresh_token")).toBe(refreshes + 1);
    expect(fresh.accessToken).not.toBe(tokens.accessToken);
    expect(fresh.refreshToken).toMatch(/^rt_/);
    expect(fresh.refreshToken).not.toBe(tokens.refreshToken);
    expect(fresh.scope).toBe("read write");
    expect(await p.check(toCheck(fresh))).toEqual({ status: "active" });
    await expect(p.refresh(tokens)).rejects.toMatchObject({ kind: "invalid_grant" });
    expect(p.canRefresh({ accessToken: fresh.accessToken })).toBe(false);
    await expect(p.refresh({ accessToken: fresh.accessToken })).rejects.toMatchObject({ kind: "invalid_grant" });
  });

  it("keeps the refresh token it holds when a refresh answers none (a service that does not rotate)", async () => {
    server.rotateRefreshTokens = false;
    try {
      const p = provider();
      const tokens = await connect(p, "dave");
      const fresh = await p.refresh(tokens);
      expect(fresh.accessToken).not.toBe(tokens.accessToken);
      expect(fresh.refreshToken).toBe(tokens.refreshToken);
      await expect(p.refresh(fresh)).resolves.toMatchObject({ refreshToken: tokens.refreshToken });
    } finally {
      server.rotateRefreshTokens = true;
    }
  });

  it("an expired token is `expired` when a refresh token is held and `invalid` when not; the provider's word counts too", async () => {
    const p = provider();
    const tokens = await connect(p, "erin");
    const past = new Date(Date.now() - 1);
    expect(await p.check({ accessToken: tokens.accessToken, accessExpiresAt: past, refreshable: true })).toEqual({ status: "expired" });
    expect(await p.check({ accessToken: tokens.accessToken, accessExpiresAt: past, refreshable: false })).toMatchObject({ status: "invalid" });
    // Expired at the provider before the broker's clock says so.
    server.expireUser("erin");
    expect(await p.check(toCheck(tokens))).toEqual({ status: "expired" });
    const fresh = await p.refresh(tokens);
    expect(await p.check(toCheck(fresh))).toEqual({ status: "active" });
  });

  it("after the user revokes access at the provider: the token is `invalid`, and with a refresh token the refresh is refused", async () => {
    const p = provider();
    const tokens = await connect(p, "frank");
    server.revokeUser("frank");
    expect(await p.check({ accessToken: tokens.accessToken, refreshable: false })).toMatchObject({ status: "invalid" });
    expect(await p.check(toCheck(tokens))).toEqual({ status: "expired" });
    await expect(p.refresh(tokens)).rejects.toMatchObject({ kind: "invalid_grant" });
    await expect(p.fetchIdentity(tokens)).rejects.toMatchObject({ kind: "invalid_grant" });
  });

  it("revokes the refresh token when one is held (its access tokens end with it), else the access token", async () => {
    const p = provider();
    const tokens = await connect(p, "grace");
    const revokes = server.count("revoke");
    await p.revoke(tokens);
    expect(server.count("revoke")).toBe(revokes + 1);
    expect(server.liveTokenCount("grace")).toBe(0);
    expect(await p.check({ accessToken: tokens.accessToken, refreshable: false })).toMatchObject({ status: "invalid" });
    // Revoking again is quiet (RFC 7009 §2.2: unknown tokens are answered 200).
    await expect(p.revoke(tokens)).resolves.toBeUndefined();

    const second = await connect(p, "grace");
    await p.revoke({ accessToken: second.accessToken });
    expect(await p.check({ accessToken: second.accessToken, refreshable: false })).toMatchObject({ status: "invalid" });
    // The refresh token was not named, so it lives on (the broker only holds what it says).
    expect(server.liveTokenCount("grace")).toBe(1);

    const noEndpoint = provider({ revokeUrl: undefined });
    const third = await connect(noEndpoint, "grace");
    const calls = server.count("revoke");
    await noEndpoint.revoke(third);
    expect(server.count("revoke")).toBe(calls);
  });
});

describe("OAuth2Provider: an unavailable service", () => {
  it("a 503 or a hang is `unavailable` on every call, never an invalid token", async () => {
    const p = provider({ timeoutMs: 300 });
    const tokens = await connect(p, "heidi");
    const { request, callbackUrl } = await authorize(p, "heidi");
    for (const outage of ["503", "hang"] as const) {
      server.outage = outage;
      try {
        await expect(p.check(toCheck(tokens))).rejects.toMatchObject({ kind: "unavailable" });
        await expect(p.fetchIdentity(tokens)).rejects.toMatchObject({ kind: "unavailable" });
        await expect(p.refresh(tokens)).rejects.toMatchObject({ kind: "unavailable" });
        await expect(p.revoke(tokens)).rejects.toMatchObject({ kind: "unavailable" });
        await expect(p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT)).rejects.toMatchObject({
          kind: "unavailable",
        });
      } finally {
        server.outage = null;
      }
    }
  });

  it("a service that is not there at all is `unavailable`", async () => {
    const gone = await startOAuth2Emulator({ clientId: "broker-client", clientSecret: SECRET, redirectUris: [REDIRECT] });
    const p = provider({}, gone);
    let tokens: Awaited<ReturnType<typeof connect>>;
    try {
      tokens = await connect(p, "ivan", gone);
    } finally {
      await gone.close();
    }
    await expect(p.check(toCheck(tokens))).rejects.toMatchObject({ kind: "unavailable" });
    await expect(p.refresh(tokens)).rejects.toMatchObject({ kind: "unavailable" });
  });
});
