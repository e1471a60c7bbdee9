// A broker process killed (kill -9) in the middle of an upstream callback leaves a transaction in
// status "exchanging". It must not look alive: its deadline is what the exchange can take, after
// which the sweep removes it, and its callback URL completes nothing (found by an attack trial).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { startBrokerProcess } from "../support/broker-process.ts";
import { startBroker } from "../support/start-broker.ts";
import { authorize, registerClient } from "../support/oauth-flow.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { until } from "../support/wait.ts";

let gh: GitHubEmulator;
let dir: string;
beforeAll(async () => {
  gh = await startGitHubEmulator({ clientId: "Iv1.broker", clientSecret: "emulator-secret" });
  dir = mkdtempSync(path.join(tmpdir(), "mab-kill-"));
});
afterAll(async () => {
  await gh.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("a broker killed mid-callback", () => {
  it("leaves a transaction that expires within the exchange deadline, is swept, and completes nothing", async () => {
    const env = {
      ...gh.brokerEnv(),
      ALLOW_ANY_USER: "true",
      UPSTREAM_TIMEOUT_SECONDS: "2",
      // Never called: the broker dies during the login.
      MCP_SERVER_URL: "http://127.0.0.1:1/mcp",
      DATABASE_URL: `file:${path.join(dir, "broker.db")}`,
    };
    const broker = await startBrokerProcess(dir, env);
    const client = await registerClient(broker.url);
    const browser = new HttpBrowser();
    gh.autoApprove = "octocat";
    const { callback } = await authorize(broker.url, client, { browser, stopAt: `${broker.url}/oauth/callback` });

    // GitHub stops answering; the broker is killed while it waits for the code exchange.
    gh.outage = "hang";
    const tokenCalls = gh.count("POST /login/oauth/access_token");
    const pending = browser.request(callback.href).catch(() => undefined);
    await until(() => gh.count("POST /login/oauth/access_token") > tokenCalls, "the code exchange to reach GitHub");
    const killedAt = Date.now();
    await broker.kill();
    await pending;
    gh.outage = null;

    // Restarted on the same database (in-process, so the sweep's clock can be moved).
    const restarted = await startBroker({ ...env, PUBLIC_URL: broker.url, PORT: "0" }, { sweepIntervalMs: 0 });
    try {
      const db = restarted.broker.database.db;
      const tx = await db.authTransaction.findFirstOrThrow({ where: { clientId: client.client_id } });
      expect(tx.status).toBe("exchanging");
      // Three upstream calls of 2 s and a minute's margin: not the 10 minutes a transaction gets.
      expect(tx.expiresAt.getTime()).toBeLessThanOrEqual(killedAt + 3 * 2000 + 60_000);

      // Before its deadline an instance may still be completing it: the sweep leaves it alone.
      expect((await restarted.broker.services.grants.sweep({ now: new Date(killedAt + 1000) })).transactions).toBe(0);
      const result = await restarted.broker.services.grants.sweep({ now: new Date(tx.expiresAt.getTime() + 1000) });
      expect(result.transactions).toBeGreaterThanOrEqual(1);
      expect(await db.authTransaction.count({ where: { clientId: client.client_id } })).toBe(0);
      expect(await db.grant.count({ where: { clientId: client.client_id } })).toBe(0);
    } finally {
      await restarted.stop();
    }
  }, 60_000);

  it("says 'interrupted' for the callback of a transaction a dead process had claimed", async () => {
    const t = await startBroker({
      ...gh.brokerEnv(),
      ALLOW_ANY_USER: "true",
    });
    try {
      const client = await registerClient(t.url);
      const browser = new HttpBrowser();
      gh.autoApprove = "hubot";
      const { callback } = await authorize(t.url, client, { browser, stopAt: `${t.url}/oauth/callback` });
      // What a process killed after its claim leaves behind.
      await t.broker.database.db.authTransaction.updateMany({ where: { clientId: client.client_id }, data: { status: "exchanging" } });
      const res = await browser.request(callback.href);
      expect(res.status).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).toContain("interrupted");
    } finally {
      gh.autoApprove = null;
      await t.stop();
    }
  });
});
