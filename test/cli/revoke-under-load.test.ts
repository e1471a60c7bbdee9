// The operator CLI (its own process, its own connections to the SQLite file) revokes
// grants while the server rotates refresh tokens back to back. Both write the same file: each must
// wait for the other's lock (busy_timeout, transactions that take the write lock at BEGIN), so
// neither side sees SQLITE_BUSY — the CLI exits 0, every refresh of a live grant is answered 200.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { runCliBinary, type Finished } from "../support/spawn.ts";
import { brokerCliEnv } from "../support/cli-in-process.ts";

const LOAD_CHAINS = 4;
const REVOKED = 3;

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker();
}, 60_000);
afterAll(async () => t.stop());

function cliProcess(args: string[]): Promise<Finished> {
  return runCliBinary(args, { cwd: t.dir, env: brokerCliEnv(t) });
}

describe("the CLI revoking while the server takes refreshes (SQLite)", () => {
  it("gets no SQLITE_BUSY on either side", async () => {
    const start = async (user: string) => {
      const { client, tokens } = await obtainTokens(t.url, { user, client: await registerClient(t.url) });
      const grantId = (await t.broker.services.grantListing.listGrants({ client: client.client_id }))[0]!.id;
      return { clientId: client.client_id, refresh: tokens.refresh_token, grantId };
    };
    const load = await Promise.all(Array.from({ length: LOAD_CHAINS }, (_, i) => start(`load${i}`)));
    const victims = await Promise.all(Array.from({ length: REVOKED }, (_, i) => start(`victim${i}`)));

    let running = true;
    const statuses = new Map<number, number>();
    let refreshes = 0;
    const driving = load.map(async (chain) => {
      while (running) {
        const res = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: chain.refresh, client_id: chain.clientId });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status !== 200) throw new Error(`refresh under load answered ${res.status}: ${JSON.stringify(res.body)}`);
        chain.refresh = String(res.body.refresh_token);
        refreshes++;
      }
    });
    try {
      for (const victim of victims) {
        const before = refreshes;
        const revoked = await cliProcess(["grants", "revoke", victim.grantId, "--json"]);
        expect(revoked.stderr).not.toMatch(/BUSY|locked/i);
        expect(revoked.code).toBe(0);
        expect(JSON.parse(revoked.stdout)).toEqual({ revoked: [victim.grantId] });
        // The server kept answering while the CLI ran.
        expect(refreshes).toBeGreaterThan(before);
        const refused = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: victim.refresh, client_id: victim.clientId });
        expect(refused).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
      }
    } finally {
      running = false;
      await Promise.all(driving);
    }
    expect([...statuses.keys()]).toEqual([200]);
  }, 120_000);
});
