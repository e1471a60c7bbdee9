// The whole authorization code flow in demo mode (embedded demo IdP, demo MCP server), over HTTP.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens, tokenRequest } from "../support/oauth-flow.ts";
import { INITIALIZE_MESSAGE, mcpPost } from "../support/mcp-probe.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
});
afterAll(async () => t.stop());

describe("authorization code flow (demo mode)", () => {
  it("issues tokens for the demo user and lets them call /mcp", async () => {
    const { tokens, client } = await obtainTokens(t.url, { user: "alice" });
    expect(tokens.access_token).toMatch(/^mab_at_/);
    expect(tokens.refresh_token).toMatch(/^mab_rt_/);
    expect(tokens.scope).toBe("mcp");
    const res = await mcpPost(t.url, tokens.access_token, INITIALIZE_MESSAGE);
    expect(res.status).toBe(200);
    const grant = await t.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
    expect(grant.subject).toBe("demo:alice");
    const refreshed = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(refreshed.status).toBe(200);
    // A new pair, rotated: new tokens of the same grant that work, the old refresh token spent.
    expect(refreshed.body).toEqual(
      expect.objectContaining({
        token_type: "Bearer",
        scope: "mcp",
        access_token: expect.stringMatching(/^mab_at_/),
        refresh_token: expect.stringMatching(/^mab_rt_/),
      }),
    );
    expect(refreshed.body.access_token).not.toBe(tokens.access_token);
    expect(refreshed.body.refresh_token).not.toBe(tokens.refresh_token);
    const call = await mcpPost(t.url, refreshed.body.access_token as string, INITIALIZE_MESSAGE);
    expect(call.status).toBe(200);
    const stored = await t.broker.database.db.refreshToken.findMany({ where: { grantId: grant.id }, orderBy: { createdAt: "asc" } });
    expect(stored).toHaveLength(2);
    expect(stored.every((row) => !Object.values(row).includes(refreshed.body.refresh_token as string))).toBe(true);
    // The old refresh token presented after its successor was used: refused (its grace ended).
    const again = await tokenRequest(t.url, {
      grant_type: "refresh_token",
      refresh_token: refreshed.body.refresh_token as string,
      client_id: client.client_id,
    });
    expect(again.status).toBe(200);
    const replayed = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(replayed.status).toBe(400);
    expect(replayed.body.error).toBe("invalid_grant");
  });
});
