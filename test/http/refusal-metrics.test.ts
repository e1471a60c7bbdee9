// mab_refusals_total after a sign-in the access policy refused: the refusal is counted, and every
// reason has a series from the start (an alert on increase() sees the first one).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, registerClient } from "../support/oauth-flow.ts";
import { HttpBrowser } from "../support/http-browser.ts";

const TOKEN = "metrics-token-for-the-test";
let t: TestBroker;
beforeAll(async () => {
  // Demo mode with a rule: only alice may sign in.
  t = await startBroker({ ALLOWED_USERS: "alice", METRICS_TOKEN: TOKEN });
});
afterAll(async () => t.stop());

async function refusals(): Promise<Record<string, number>> {
  const text = await (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
  return Object.fromEntries([...text.matchAll(/^mab_refusals_total\{reason="([a-z_]+)"\} (\d+)$/gm)].map((m) => [m[1]!, Number(m[2])]));
}

describe("mab_refusals_total", () => {
  it("has a series for every reason at zero from the start, and counts a sign-in refused by the policy as policy_denied", async () => {
    expect(await refusals()).toEqual({ invalid_token: 0, insufficient_scope: 0, session_owner: 0, policy_denied: 0, tool_denied: 0, rate_limited: 0 });
    const browser = new HttpBrowser();
    const client = await registerClient(t.url);
    const { callback } = await authorize(t.url, client, { user: "mallory", browser, stopAt: `${t.url}/oauth/callback` });
    expect((await browser.request(callback.href)).status).toBe(403);
    expect((await refusals()).policy_denied).toBe(1);
  });
});
