// GitHubProvider against the GitHub emulator (GitHub's real endpoints, GHES layout).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { GitHubProvider } from "../../src/upstream/github.ts";
import { toCheck, type UpstreamError } from "../../src/upstream/provider.ts";
import { s256Challenge } from "../../src/crypto/pkce.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";

const REDIRECT = "http://127.0.0.1:9/oauth/callback";
let gh: GitHubEmulator;

function provider(overrides: Partial<ConstructorParameters<typeof GitHubProvider>[0]> = {}) {
  return new GitHubProvider({
    clientId: "Iv1.test",
    clientSecret: "s3cret-value",
    githubUrl: gh.url,
    apiUrl: gh.apiUrl,
    scopes: "read:user user:email",
    timeoutMs: 1000,
    ...overrides,
  });
}

/** Follows the authorization URL the way a browser would with the emulator's auto-approval. */
async function login(p: GitHubProvider, user = "octocat") {
  gh.autoApprove = user;
  const request = await p.createAuthorizationRequest(REDIRECT);
  const res = await fetch(request.url, { redirect: "manual" });
  const callbackUrl = new URL(res.headers.get("location")!);
  return { request, callbackUrl };
}

beforeAll(async () => {
  gh = await startGitHubEmulator({ clientId: "Iv1.test", clientSecret: "s3cret-value" });
});
afterAll(async () => gh.close());

describe("PKCE S256 (src/crypto/pkce.ts)", () => {
  it("matches the example of RFC 7636 appendix B", () => {
    expect(s256Challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk")).toBe("E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
  });
});

describe("GitHubProvider", () => {
  it("verifies its app credentials without a user: right ones pass, a wrong secret or an unreachable GitHub say so", async () => {
    await expect(provider().verifyCredentials(REDIRECT)).resolves.toBeUndefined();
    await expect(provider({ clientSecret: "wrong" }).verifyCredentials(REDIRECT)).rejects.toMatchObject({
      kind: "misconfigured",
      message: expect.stringContaining("UPSTREAM_CLIENT_SECRET"),
    });
    await expect(provider({ githubUrl: "http://127.0.0.1:1" }).verifyCredentials(REDIRECT)).rejects.toMatchObject({ kind: "unavailable" });
  });

  it("builds GitHub's authorization URL with PKCE S256 and state", async () => {
    const request = await provider().createAuthorizationRequest(REDIRECT);
    const url = new URL(request.url);
    expect(url.origin + url.pathname).toBe(`${gh.url}/login/oauth/authorize`);
    expect(url.searchParams.get("client_id")).toBe("Iv1.test");
    expect(url.searchParams.get("redirect_uri")).toBe(REDIRECT);
    expect(url.searchParams.get("code_challenge_method")).toBe("S256");
    expect(url.searchParams.get("code_challenge")).toBe(s256Challenge(request.codeVerifier));
    expect(url.searchParams.get("state")).toBe(request.state);
    expect(url.searchParams.get("scope")).toBe("read:user user:email");
  });

  it("exchanges the code and reads the identity with the primary e-mail", async () => {
    const p = provider();
    const { request, callbackUrl } = await login(p);
    const tokens = await p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT);
    expect(tokens.accessToken).toMatch(/^gho_/);
    const identity = await p.fetchIdentity(tokens);
    expect(identity).toMatchObject({ subject: "github:583231", login: "octocat", email: "octocat@users.noreply.example" });
    // The policy facts: the verified address from /user/emails; no org rule, so no membership read.
    expect(identity.verifiedEmails).toEqual(["octocat@users.noreply.example"]);
    expect(identity.memberships).toEqual([]);
    expect(await p.check(toCheck(tokens))).toEqual({ status: "active" });
  });

  it("refuses a state mismatch and a wrong verifier", async () => {
    const p = provider();
    const { request, callbackUrl } = await login(p);
    await expect(p.exchangeCode({ callbackUrl, expectedState: "other", codeVerifier: request.codeVerifier }, REDIRECT)).rejects.toMatchObject({
      kind: "protocol",
    });
    await expect(p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: "x".repeat(43) }, REDIRECT)).rejects.toMatchObject({
      kind: "invalid_grant",
    });
  });

  it("maps a denial", async () => {
    const callbackUrl = new URL(`${REDIRECT}?error=access_denied&state=s`);
    await expect(provider().exchangeCode({ callbackUrl, expectedState: "s", codeVerifier: "v" }, REDIRECT)).rejects.toMatchObject({ kind: "denied" });
  });

  it("sees a revoked token as invalid, and revokes tokens itself", async () => {
    const p = provider();
    const { request, callbackUrl } = await login(p, "hubot");
    const tokens = await p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT);
    gh.revokeUser("hubot");
    expect(await p.check(toCheck(tokens))).toMatchObject({ status: "invalid" });
    const second = await login(p, "monalisa");
    const t2 = await p.exchangeCode(
      { callbackUrl: second.callbackUrl, expectedState: second.request.state, codeVerifier: second.request.codeVerifier },
      REDIRECT,
    );
    const before = gh.count("DELETE /api/v3/applications/:id/token");
    await p.revoke(t2);
    expect(gh.count("DELETE /api/v3/applications/:id/token")).toBe(before + 1);
    expect(await p.check(toCheck(t2))).toMatchObject({ status: "invalid" });
  });

  it("refreshes expiring user tokens (GitHub Apps) with rotation", async () => {
    gh.expiringTokensSeconds = 60;
    try {
      const p = provider();
      const { request, callbackUrl } = await login(p);
      const tokens = await p.exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT);
      expect(tokens.refreshToken).toMatch(/^ghr_/);
      expect(tokens.accessExpiresAt!.getTime()).toBeGreaterThan(Date.now());
      expect(p.canRefresh(tokens)).toBe(true);
      const fresh = await p.refresh(tokens);
      expect(fresh.accessToken).not.toBe(tokens.accessToken);
      expect(fresh.refreshToken).not.toBe(tokens.refreshToken);
      await expect(p.refresh(tokens)).rejects.toMatchObject({ kind: "invalid_grant" });
      expect(await p.check(toCheck({ ...fresh, accessExpiresAt: new Date(Date.now() - 1) }))).toEqual({ status: "expired" });
    } finally {
      gh.expiringTokensSeconds = undefined;
    }
  });

  it("says what to fix for wrong client credentials, without the secret", async () => {
    const p = provider({ clientSecret: "wrong-secret-value" });
    const { request, callbackUrl } = await login(p);
    const err = (await p
      .exchangeCode({ callbackUrl, expectedState: request.state, codeVerifier: request.codeVerifier }, REDIRECT)
      .catch((e: unknown) => e)) as UpstreamError;
    expect(err.kind).toBe("misconfigured");
    expect(err.message).toMatch(/UPSTREAM_CLIENT_SECRET/);
    expect(err.message).not.toContain("wrong-secret-value");
  });

  it("reports an outage as unavailable within the timeout", async () => {
    const p = provider({ timeoutMs: 300 });
    gh.outage = "hang";
    try {
      // A hanging GitHub is cut by the provider's own timeout (else this waits for Jest's).
      await expect(p.check({ accessToken: "gho_x", refreshable: false })).rejects.toMatchObject({ kind: "unavailable" });
      gh.outage = "503";
      await expect(p.check({ accessToken: "gho_x", refreshable: false })).rejects.toMatchObject({ kind: "unavailable" });
    } finally {
      gh.outage = null;
    }
  });
});
