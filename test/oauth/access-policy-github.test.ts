// Who may sign in with GitHub, through the GitHub emulator's real endpoints (org and team
// membership read with the user's token, verified e-mails): org and team rules admit members
// only, and a user removed from the org loses access at the next re-check.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, obtainTokens, registerClient, tokenRequest, type RegisteredTestClient } from "../support/oauth-flow.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { mcpStatus } from "../support/mcp-probe.ts";

let gh: GitHubEmulator;
beforeAll(async () => {
  gh = await startGitHubEmulator({ clientId: "Iv1.policy", clientSecret: "policy-secret" });
  gh.addOrgMember("acme", "octocat");
  gh.addTeamMember("acme", "platform", "hubot");
  gh.addTeamMember("acme", "platform", "pending-pat", { state: "pending" });
  gh.setEmails("monalisa", [
    { email: "mona@acme.com", primary: true, verified: false },
    { email: "mona@personal.example", primary: false, verified: true },
  ]);
  gh.setEmails("verity", [{ email: "verity@acme.com", primary: true, verified: true }]);
});
afterAll(async () => gh.close());

function startGitHubBroker(policy: Record<string, string>, clock?: ManualClock): Promise<TestBroker> {
  return startBroker(
    {
      ...gh.brokerEnv(),
      ...policy,
    },
    clock ? { clock } : {},
  );
}

/** What the broker's callback does for `user`: a code for the client, or the refusal page. */
async function signInOutcome(broker: TestBroker, client: RegisteredTestClient, user: string): Promise<string> {
  const browser = new HttpBrowser();
  const { callback } = await authorize(broker.url, client, { user, browser, stopAt: `${broker.url}/oauth/callback` });
  const res = await browser.request(callback.href);
  await res.body?.cancel();
  const location = res.headers.get("location");
  if (res.status === 302 && location && new URL(location).searchParams.get("code")) return "code";
  return res.status === 403 ? "refused" : `unexpected ${res.status} ${location}`;
}

describe("org and team rules", () => {
  let broker: TestBroker;
  let client: RegisteredTestClient;
  beforeAll(async () => {
    broker = await startGitHubBroker({ ALLOWED_GITHUB_ORGS: "acme/platform", ALLOWED_EMAIL_DOMAINS: "acme.com" });
    client = await registerClient(broker.url);
  });
  afterAll(async () => broker.stop());

  it("asks GitHub for read:org and user:email itself", async () => {
    const browser = new HttpBrowser();
    const { callback } = await authorize(broker.url, client, { browser, stopAt: `${gh.url}/login/oauth/authorize` });
    expect(callback.searchParams.get("scope")!.split(" ")).toEqual(expect.arrayContaining(["read:user", "user:email", "read:org"]));
  });

  it.each([
    ["hubot", "an active member of the team", "code"],
    ["verity", "a verified address in an allowed domain", "code"],
    ["octocat", "a member of the org, not of the team", "refused"],
    ["pending-pat", "a pending team membership", "refused"],
    ["monalisa", "an allowed domain, but only on an unverified address", "refused"],
  ])("%s (%s) → %s", async (user, _why, outcome) => {
    expect(await signInOutcome(broker, client, user)).toBe(outcome);
    // A refused account's GitHub token is given back at once; an admitted one's is kept.
    expect(gh.liveTokenCount(user)).toBe(outcome === "refused" ? 0 : 1);
  });
});

it("a user removed from the org loses access at the next re-check; the refresh token is refused", async () => {
  const clock = new ManualClock();
  gh.addOrgMember("globex", "octocat");
  const broker = await startGitHubBroker({ ALLOWED_GITHUB_ORGS: "globex", UPSTREAM_RECHECK_SECONDS: "60" }, clock);
  try {
    const { client, tokens } = await obtainTokens(broker.url, { user: "octocat" });
    const mcp = () => mcpStatus(broker.url, tokens.access_token);
    expect(await mcp()).toBe(200);
    gh.removeOrgMember("globex", "octocat");
    const membershipChecks = gh.count("GET /api/v3/orgs/:org/members/:user");
    clock.advance(30_000);
    expect(await mcp()).toBe(200);
    // Inside the window nothing is asked upstream again.
    expect(gh.count("GET /api/v3/orgs/:org/members/:user")).toBe(membershipChecks);
    clock.advance(31_000);
    expect(await mcp()).toBe(401);
    const refresh = await tokenRequest(broker.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(refresh.body.error).toBe("invalid_grant");
    const grant = await broker.broker.database.db.grant.findFirst({ where: { subject: "github:583231" } });
    expect(grant?.revokedReason).toBe("policy_denied");
    // The upstream token was given back to GitHub.
    expect(gh.liveTokenCount("octocat")).toBe(0);
  } finally {
    await broker.stop();
  }
});

describe("look-alike addresses", () => {
  // U+212A KELVIN SIGN lower-cases to "k": an address GitHub verified at "\u212Aaka.com" (a domain
  // someone else owns) must not pass for kaka.com.
  let broker: TestBroker;
  let client: RegisteredTestClient;
  beforeAll(async () => {
    gh.setEmails("kelvin", [{ email: "x@\u212Aaka.com", primary: true, verified: true }]);
    gh.setEmails("kaka", [{ email: "x@KAKA.com", primary: true, verified: true }]);
    broker = await startGitHubBroker({ ALLOWED_EMAIL_DOMAINS: "kaka.com" });
    client = await registerClient(broker.url);
  });
  afterAll(async () => broker.stop());

  it.each([
    ["kelvin", "a verified x@\u212Aaka.com", "refused"],
    ["kaka", "a verified x@KAKA.com (ASCII case is still ignored)", "code"],
  ])("%s (%s) → %s", async (user, _why, outcome) => {
    expect(await signInOutcome(broker, client, user)).toBe(outcome);
  });
});
