// End to end with the real MCP SDK client and Chromium, over a session's life: the access token
// expires mid-session and the SDK refreshes it; the operator revokes the user with the real CLI
// binary and the SDK starts a new authorization; a user who denies consent leaves the client with
// access_denied.
import { afterEach, beforeAll, beforeEach, expect, it } from "@jest/globals";
import type { BrowserContext } from "playwright-core";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { authorizeInBrowser, describeWithChromium, newUser, useChromium } from "../support/browser.ts";
import { CallbackServer, connectWithOAuth, TestOAuthProvider, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { runCliBinary } from "../support/spawn.ts";
import { ManualClock } from "../../src/lib/clock.ts";

const whoami = async (c: ConnectedClient) => {
  const result = CallToolResultSchema.parse(await c.client.callTool({ name: "whoami", arguments: {} }));
  const first = result.content[0];
  return JSON.parse(first?.type === "text" ? first.text : "{}") as { subject: string; clientId: string };
};

async function disconnect(c: ConnectedClient | undefined): Promise<void> {
  // End the session cleanly (DELETE) rather than cutting its streams; a revoked one answers 401.
  await c?.transport.terminateSession().catch(() => undefined);
  await c?.client.close();
}

const chromium = useChromium();

describeWithChromium("a session's life, with the MCP SDK client and Chromium", () => {
  let t: TestBroker;
  let callback: CallbackServer;
  // Each user has a browser of their own: one browser stays signed in at the IdP.
  let context: BrowserContext;
  // The broker's tokens expire by this clock, moved by the test: no waiting for a real expiry.
  const clock = new ManualClock();
  beforeAll(async () => {
    [t, callback] = await Promise.all([startBroker({ ACCESS_TOKEN_TTL_SECONDS: "2" }, { clock }), new CallbackServer().start()]);
    chromium.cleanup(() => t.stop());
    chromium.cleanup(() => callback.close());
  }, 30_000);
  beforeEach(async () => {
    context = await newUser(chromium.browser);
  });
  afterEach(async () => {
    await context.close();
  });

  it("an access token expiring mid-session is refreshed by the SDK and the session goes on", async () => {
    const agent = authorizeInBrowser(context, { user: "rita", name: "e2e-refresh" });
    const c = await connectWithOAuth(`${t.url}/mcp`, callback, agent.authorize);
    try {
      expect(c.provider.savedTokens?.expires_in).toBe(2);
      expect((await whoami(c)).subject).toBe("demo:rita");
      const before = { ...c.provider.savedTokens! };
      const refreshesBefore = await t.broker.database.db.refreshToken.count();

      clock.advance(2600);
      const who = await whoami(c);

      expect(who.subject).toBe("demo:rita");
      // The SDK got a 401, refreshed (rotating the refresh token), and retried; no new login.
      expect(c.provider.savedTokens!.access_token).not.toBe(before.access_token);
      expect(c.provider.savedTokens!.refresh_token).not.toBe(before.refresh_token);
      expect(await t.broker.database.db.refreshToken.count()).toBe(refreshesBefore + 1);
      expect(c.provider.redirects).toBe(1);
      // And the same MCP session carries on.
      expect(await c.client.callTool({ name: "echo", arguments: { message: "still here" } })).toMatchObject({
        content: [{ type: "text", text: "still here" }],
      });
    } finally {
      await disconnect(c);
    }
  });

  it("revoked by the operator CLI: the next call gets 401 and the SDK starts a new authorization", async () => {
    const agent = authorizeInBrowser(context, { user: "bob", name: "e2e-revoke" });
    const provider = new TestOAuthProvider(callback.url, agent.authorize);
    const c = await connectWithOAuth(`${t.url}/mcp`, callback, agent.authorize, provider);
    let again: ConnectedClient | undefined;
    try {
      expect((await whoami(c)).subject).toBe("demo:bob");

      const { config } = t.broker;
      const cli = await runCliBinary(["grants", "revoke", "--user", "demo:bob"], {
        cwd: t.dir,
        env: { DATABASE_URL: config.databaseUrl, SECRET_KEY: config.secretKey.toString("base64"), PUBLIC_URL: config.publicUrl },
      });
      expect(cli.code).toBe(0);
      expect(cli.stdout).toMatch(/^Revoked 1 grant\(s\): /);
      // The broker picks up revocations made by other processes from its feed (polled every second).
      await t.broker.services.grants.revocationFeed.poll();

      const direct = await fetch(`${t.url}/mcp`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${provider.savedTokens!.access_token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: "{}",
      });
      expect(direct.status).toBe(401);
      expect(direct.headers.get("www-authenticate")).toContain('error="invalid_token"');

      await expect(whoami(c)).rejects.toBeInstanceOf(UnauthorizedError);
      // The refresh token died with the grant; the SDK dropped its tokens and sent the user to log in again.
      expect(provider.invalidations).toContain("tokens");
      expect(provider.redirects).toBe(2);
      expect(agent.runs).toHaveLength(2);
      const outcome = await callback.next();
      expect(outcome.code).toEqual(expect.any(String));

      await c.transport.finishAuth(outcome.code!);
      again = await connectWithOAuth(`${t.url}/mcp`, callback, agent.authorize, provider);
      expect((await whoami(again)).subject).toBe("demo:bob");
      expect(provider.redirects).toBe(2);
    } finally {
      await disconnect(again);
      await disconnect(c);
    }
  });

  it("consent denied: the client gets access_denied at its callback", async () => {
    const agent = authorizeInBrowser(context, { user: "dora", decision: "Deny", name: "e2e-deny" });
    await expect(connectWithOAuth(`${t.url}/mcp`, callback, agent.authorize)).rejects.toThrow("authorization failed: access_denied");
    expect(agent.runs[0]!.pages.map((p) => p.kind)).toEqual(["consent", "callback"]);
    const back = agent.runs[0]!.callback.searchParams;
    expect(back.get("error")).toBe("access_denied");
    expect(back.get("iss")).toBe(t.url);
    expect(back.get("code")).toBeNull();
    expect(await t.broker.database.db.grant.count({ where: { subject: "demo:dora" } })).toBe(0);
  });
});
