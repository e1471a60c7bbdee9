// Upstream tokens over time, with the GitHub emulator handing out expiring user tokens (GitHub App
// mode): once the broker has renewed a user's token, the session whose child holds the old one
// ends with 404 at its next request, and the new session's child gets the new token. Requests
// without a session (MCP 2026-07-28) simply go to a new warm child with the new token.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { alive, answerOf, fixtureEnv, MCP_HEADERS, modernRequest, nextMessage, openSession, sseMessages, type Whoami } from "./stdio-support.ts";
import { until } from "../support/wait.ts";

describe("a renewed upstream token", () => {
  let gh: GitHubEmulator;
  let t: TestBroker;
  const clock = new ManualClock();
  beforeAll(async () => {
    gh = await startGitHubEmulator({ clientId: "Iv1.stdio", clientSecret: "stdio-secret" });
    gh.expiringTokensSeconds = 60;
    t = await startBroker(
      fixtureEnv({
        ...gh.brokerEnv(),
        ALLOW_ANY_USER: "true",
      }),
      { clock },
    );
  }, 30_000);
  afterAll(async () => {
    await t?.stop();
    await gh?.close();
  });

  it("ends the session of the child holding the old one (404); a new session gets the new one", async () => {
    gh.autoApprove = "octo";
    const { tokens } = await obtainTokens(t.url, { user: "octo" });
    const auth = { authorization: `Bearer ${tokens.access_token}` };
    const mcp = `${t.url}/mcp`;
    const whoami = async (session: string) => {
      const res = await fetch(mcp, {
        method: "POST",
        headers: { ...MCP_HEADERS, ...auth, "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "whoami", arguments: {} } }),
      });
      if (res.status !== 200) return res.status;
      const result = (await nextMessage(sseMessages(res))).result as { content: Array<{ text: string }> };
      return JSON.parse(result.content[0]!.text) as Whoami;
    };

    const first = await openSession(mcp, auth);
    const before = (await whoami(first)) as Whoami;
    expect(before.token).toMatch(/^ghu_/);

    // Past the upstream token's expiry and the re-check window: the next request renews it.
    clock.advance(91_000);
    expect(await whoami(first)).toBe(404);
    await until(() => !alive(before.pid), "the child with the old token to stop");

    const second = await openSession(mcp, auth);
    const after = (await whoami(second)) as Whoami;
    expect(after.token).toMatch(/^ghu_/);
    expect(after.token).not.toBe(before.token);
    expect(after.pid).not.toBe(before.pid);
  });

  it("retires the warm child of requests without a session; the next request goes to a new one with the new token", async () => {
    gh.autoApprove = "hubot";
    const { tokens } = await obtainTokens(t.url, { user: "hubot" });
    const auth = { authorization: `Bearer ${tokens.access_token}` };
    const whoami = async (id: number) => {
      const answer = await answerOf(await modernRequest(`${t.url}/mcp`, auth, id, "tools/call", { name: "whoami", arguments: {} }), id);
      return JSON.parse((answer.result as { content: Array<{ text: string }> }).content[0]!.text) as Whoami;
    };
    const before = await whoami(1);
    expect(before.token).toMatch(/^ghu_/);

    clock.advance(91_000);
    const after = await whoami(2);
    expect(after.token).toMatch(/^ghu_/);
    expect(after.token).not.toBe(before.token);
    expect(after.pid).not.toBe(before.pid);
    await until(() => !alive(before.pid), "the child with the old token to stop");
  });
});
