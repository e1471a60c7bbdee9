// PostgreSQL at scale: three broker instances on one PostgreSQL database, requests spread
// round-robin as a load balancer would. A token issued by one validates on all; a revocation on one
// reaches the others' caches through LISTEN/NOTIFY — their revocation poll is set to an hour here,
// so nothing else could carry it — and one refresh token presented to all three at once yields
// exactly one new pair.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens, tokenRequest } from "../support/oauth-flow.ts";
import { createPostgresDatabase, postgresAvailable, type TestPostgresDatabase } from "../support/pg-database.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import type { Revocation } from "../../src/grants/context.ts";
import { mcpStatus } from "../support/mcp-probe.ts";

const HOUR = 3_600_000;

/** Resolves when this instance's caches are told about a revocation matching `matches`. */
function heard(instance: TestBroker, matches: (revocation: Revocation) => boolean): Promise<void> {
  return new Promise((resolve) => {
    const stop = instance.broker.services.grants.bus.subscribe((revocation) => {
      if (!matches(revocation)) return;
      stop();
      resolve();
    });
  });
}

(postgresAvailable ? describe : describe.skip)("three instances on one PostgreSQL database", () => {
  let database: TestPostgresDatabase;
  let mcpServer: DemoMcpServer;
  let instances: TestBroker[];
  beforeAll(async () => {
    database = await createPostgresDatabase();
    mcpServer = await startDemoMcpServer();
    const shared = { DATABASE_URL: database.url, SECRET_KEY: randomBytes(32).toString("base64"), MCP_SERVER_URL: mcpServer.url };
    const first = await startBroker(shared, { revocationPollMs: HOUR });
    instances = [first, ...(await Promise.all([1, 2].map(() => startBroker({ ...shared, PUBLIC_URL: first.url }, { revocationPollMs: HOUR }))))];
  }, 60_000);
  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop()));
    await mcpServer.close();
    await database.drop();
  });

  /** A token, validated (and so cached) by every instance. */
  async function everywhereValid() {
    const { client, tokens } = await obtainTokens(instances[0]!.url);
    for (const instance of instances) {
      expect(await mcpStatus(instance.origin, tokens.access_token)).toBe(200);
      expect(await mcpStatus(instance.origin, tokens.access_token)).toBe(200);
    }
    return { client, tokens };
  }

  it("a token from one validates on all; a grant revoked on one is refused by the others at once", async () => {
    const { client, tokens } = await everywhereValid();
    const grant = await instances[0]!.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
    const [first, second, third] = instances as [TestBroker, TestBroker, TestBroker];
    const told = Promise.all([first, third].map((i) => heard(i, (r) => r.grantIds?.includes(grant.id) ?? false)));
    const started = performance.now();
    expect(await second.broker.services.grants.lifecycle.revokeGrant(grant.id, "operator")).toBe(true);
    await told;
    process.stdout.write(
      `[measure] a revocation on one of three PostgreSQL instances reached the other two after ${Math.round(performance.now() - started)} ms\n`,
    );
    for (const instance of instances) expect(await mcpStatus(instance.origin, tokens.access_token)).toBe(401);
  });

  it("a single access token revoked at /revoke on one is refused by the others at once", async () => {
    const { client, tokens } = await everywhereValid();
    const [first, second, third] = instances as [TestBroker, TestBroker, TestBroker];
    const told = Promise.all([first, second].map((i) => heard(i, (r) => (r.tokenHashes?.length ?? 0) > 0)));
    const revoked = await fetch(`${third.origin}/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: tokens.access_token, token_type_hint: "access_token", client_id: client.client_id }),
    });
    expect(revoked.status).toBe(200);
    await told;
    for (const instance of instances) expect(await mcpStatus(instance.origin, tokens.access_token)).toBe(401);
    // The grant itself lives on: its refresh token still works, on any instance.
    expect((await tokenRequest(first.origin, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id })).status).toBe(
      200,
    );
  });

  it("one refresh token presented to all three at once yields exactly one new pair", async () => {
    const { client, tokens } = await obtainTokens(instances[0]!.url);
    const form = { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id };
    const answers = await Promise.all(instances.map((i) => tokenRequest(i.origin, form)));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(new Set(answers.map((a) => `${String(a.body.access_token)} ${String(a.body.refresh_token)}`)).size).toBe(1);
    const grant = await instances[0]!.broker.database.db.grant.findFirstOrThrow({ where: { clientId: client.client_id } });
    expect(await instances[0]!.broker.database.db.refreshToken.count({ where: { grantId: grant.id } })).toBe(2);
    expect(grant.revokedAt).toBeNull();
  });
});
