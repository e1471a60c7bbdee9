// Revoke at /account on one broker instance; another instance on the same database, which had the
// access token validated and cached, refuses it within a second (its revocation feed). Run on
// SQLite (two processes' worth of brokers on one file) and, when available, PostgreSQL.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startTwoInstances, type TestBroker, type TwoInstances } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { databaseTargets } from "../support/database-targets.ts";
import { AccountVisitor } from "./account-visitor.ts";
import { mcpStatus } from "../support/mcp-probe.ts";

for (const target of databaseTargets("the cross-instance revocation tests")) {
  describe(`two instances on one ${target.name} database`, () => {
    let instances: TwoInstances;
    let first: TestBroker;
    let second: TestBroker;
    let cleanup: () => Promise<void>;
    beforeAll(async () => {
      const database = await target.setup();
      cleanup = database.cleanup;
      instances = await startTwoInstances(database.url);
      ({ first, second } = instances);
    }, 60_000);
    afterAll(async () => {
      await instances.stop();
      await cleanup();
    });

    it("a grant revoked at /account on one is refused by the other as soon as its revocation feed publishes it", async () => {
      const user = "quinn";
      const account = new AccountVisitor(first.url);
      await account.signIn(user);
      for (let round = 0; round < 3; round++) {
        const { client, tokens } = await obtainTokens(first.url, { user });
        const grant = await first.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
        // The other instance validates the token and keeps the validation in its cache.
        expect(await mcpStatus(second.origin, tokens.access_token)).toBe(200);
        expect(await mcpStatus(second.origin, tokens.access_token)).toBe(200);
        const hitsBefore = second.broker.services.grants.validator.stats.hits;
        expect(await mcpStatus(second.origin, tokens.access_token)).toBe(200);
        expect(second.broker.services.grants.validator.stats.hits).toBe(hitsBefore + 1);

        // The moment the other instance's caches drop the grant: its feed publishes it on its bus.
        const learned = new Promise<void>((resolve) => {
          const stop = second.broker.services.grants.bus.subscribe((revocation) => {
            if (!revocation.grantIds?.includes(grant.id)) return;
            stop();
            resolve();
          });
        });
        const { csrf } = await account.open();
        expect((await account.post({ action: "revoke", csrf, grant: grant.id })).status).toBe(303);
        expect(await mcpStatus(first.origin, tokens.access_token)).toBe(401);
        await learned;
        expect(await mcpStatus(second.origin, tokens.access_token)).toBe(401);
      }
    });
  });
}
