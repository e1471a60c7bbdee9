// Races at /token. The same code redeemed 20 times at once gives exactly one
// token response (and, being a replay, revokes the grant); the same refresh token presented 20
// times at once gives exactly one new pair (the rotation rule's retry window), and the grant goes
// on. On SQLite with one instance, and on PostgreSQL with two instances sharing the database,
// requests spread across both, as a load balancer would.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { authorize, registerClient, tokenRequest, type RegisteredTestClient } from "../support/oauth-flow.ts";
import { startBroker, startTwoInstances, type TestBroker } from "../support/start-broker.ts";
import { createPostgresDatabase, postgresAvailable } from "../support/pg-database.ts";

const PARALLEL = 20;

interface Deployment {
  /** PUBLIC_URL, shared by every instance. */
  readonly url: string;
  /** Where each instance listens. */
  readonly origins: string[];
  readonly first: TestBroker;
  stop(): Promise<void>;
}

async function singleSqlite(): Promise<Deployment> {
  const t = await startBroker();
  return { url: t.url, origins: [t.origin], first: t, stop: () => t.stop() };
}

async function twoInstancesOnPostgres(): Promise<Deployment> {
  const database = await createPostgresDatabase();
  const instances = await startTwoInstances(database.url);
  return {
    url: instances.first.url,
    origins: [instances.first.origin, instances.second.origin],
    first: instances.first,
    async stop() {
      await instances.stop();
      await database.drop();
    },
  };
}

const deployments: Array<[string, () => Promise<Deployment>]> = [["SQLite, one instance", singleSqlite]];
if (postgresAvailable) deployments.push(["PostgreSQL, two instances", twoInstancesOnPostgres]);
else console.warn("PostgreSQL server binaries not found: the /token race tests run on SQLite only.");

describe.each(deployments)("/token under concurrent requests (%s)", (_name, deploy) => {
  let d: Deployment;
  let client: RegisteredTestClient;
  beforeAll(async () => {
    d = await deploy();
    client = await registerClient(d.url);
  }, 60_000);
  afterAll(async () => d.stop());

  /** Sends the same form PARALLEL times at once, round-robin over the instances. */
  const race = (form: Record<string, string>) => Promise.all(Array.from({ length: PARALLEL }, (_, i) => tokenRequest(d.origins[i % d.origins.length]!, form)));

  /** What the first instance's bearer validation makes of an access token (null: refused). */
  const introspectAccess = (token: string) => d.first.broker.services.grants.validator.validate(token).catch(() => null);

  async function freshCode(): Promise<{ code: string; verifier: string }> {
    const { callback, verifier } = await authorize(d.url, client, { scope: "mcp offline_access" });
    const code = callback.searchParams.get("code");
    if (!code) throw new Error(`no code: ${callback.href}`);
    return { code, verifier };
  }

  const codeForm = (c: { code: string; verifier: string }) => ({
    grant_type: "authorization_code",
    code: c.code,
    code_verifier: c.verifier,
    redirect_uri: client.redirect_uri,
    client_id: client.client_id,
    resource: `${d.url}/mcp`,
  });

  it(`the same code redeemed ${PARALLEL} times at once: exactly one success, and the replays revoke the grant`, async () => {
    const results = await race(codeForm(await freshCode()));
    const ok = results.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of results.filter((r) => r.status !== 200)) expect({ status: r.status, error: r.body.error }).toEqual({ status: 400, error: "invalid_grant" });
    // OAuth 2.1 §4.1.3: a code used more than once revokes what it issued.
    const issued = ok[0]!.body as { access_token: string; refresh_token: string };
    expect(await introspectAccess(issued.access_token)).toBeNull();
    const refreshed = await tokenRequest(d.origins[0]!, { grant_type: "refresh_token", refresh_token: issued.refresh_token, client_id: client.client_id });
    expect(refreshed.body.error).toBe("invalid_grant");
  }, 60_000);

  it(`the same refresh token presented ${PARALLEL} times at once: exactly one new pair, and the grant lives on`, async () => {
    const first = await tokenRequest(d.origins[0]!, codeForm(await freshCode()));
    expect(first.status).toBe(200);
    const original = first.body as { access_token: string; refresh_token: string };

    const results = await race({ grant_type: "refresh_token", refresh_token: original.refresh_token, client_id: client.client_id });
    expect(results.map((r) => r.status)).toEqual(Array(PARALLEL).fill(200));
    // Every answer is the same pair: one rotation, the others its retries within the grace window.
    const pairs = new Set(results.map((r) => `${String(r.body.access_token)} ${String(r.body.refresh_token)}`));
    expect(pairs.size).toBe(1);
    const next = results[0]!.body as { access_token: string; refresh_token: string };
    expect(next.refresh_token).not.toBe(original.refresh_token);

    const db = d.first.broker.database.db;
    const grant = await introspectAccess(next.access_token);
    expect(grant).not.toBeNull();
    // In the database: the code exchange's pair and one rotation's pair, nothing more.
    expect(await db.accessToken.count({ where: { grantId: grant!.grantId } })).toBe(2);
    expect(await db.refreshToken.count({ where: { grantId: grant!.grantId } })).toBe(2);

    // The successor works; once it has been used, the old token is reuse and ends the grant (rule 6).
    const third = await tokenRequest(d.origins[d.origins.length - 1]!, {
      grant_type: "refresh_token",
      refresh_token: next.refresh_token,
      client_id: client.client_id,
    });
    expect(third.status).toBe(200);
    const reuse = await tokenRequest(d.origins[0]!, { grant_type: "refresh_token", refresh_token: original.refresh_token, client_id: client.client_id });
    expect(reuse.body.error).toBe("invalid_grant");
    const grantRow = await db.grant.findUniqueOrThrow({ where: { id: grant!.grantId } });
    expect(grantRow.revokedReason).toBe("refresh_reuse");
  }, 60_000);
});
