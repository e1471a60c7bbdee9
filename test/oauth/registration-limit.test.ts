// PostgreSQL at scale: the per-address registration limit is counted in the database, so
// broker instances sharing it share one budget per address — on PostgreSQL and on one SQLite file,
// with the instances in this process on one manual clock (exact counts, no sleeps), and with a real
// second broker process on the SQLite file (its own clock: bounds, not exact counts).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { copyMigratedSqlite } from "../support/template-db.ts";
import { databaseTargets } from "../support/database-targets.ts";
import { freshIp, postJson, type HttpResult } from "../support/oauth-client.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { REGISTRATION_RATE_LIMIT } from "../../src/grants/rate-limit.ts";

const BUDGET = REGISTRATION_RATE_LIMIT.burst;
const publicClient = { redirect_uris: ["http://127.0.0.1:9999/callback"], token_endpoint_auth_method: "none" };
/** A registration from `ip` (TRUST_PROXY=true: the forwarded address is the client's). */
const register = (origin: string, ip: string): Promise<HttpResult> => postJson(`${origin}/register`, publicClient, { "x-forwarded-for": ip });

let mcpServer: DemoMcpServer;
beforeAll(async () => {
  mcpServer = await startDemoMcpServer();
});
afterAll(async () => {
  await mcpServer.close();
});

describe.each(databaseTargets("registration limit tests"))("two broker instances on one $name database", (target) => {
  let instances: [TestBroker, TestBroker];
  let cleanup: () => Promise<void>;
  const clock = new ManualClock();
  const clients = () => instances[0].broker.database.db.client.count();

  beforeAll(async () => {
    const setup = await target.setup();
    cleanup = setup.cleanup;
    const shared = { DATABASE_URL: setup.url, SECRET_KEY: randomBytes(32).toString("base64"), MCP_SERVER_URL: mcpServer.url, TRUST_PROXY: "true" };
    const first = await startBroker(shared, { clock, migrate: false });
    instances = [first, await startBroker({ ...shared, PUBLIC_URL: first.url }, { clock, migrate: false })];
  }, 60_000);
  afterAll(async () => {
    await Promise.all(instances.map((i) => i.stop()));
    await cleanup();
  });

  it("registrations spread over both get 429 once the shared budget is spent; the refill is shared too", async () => {
    const ip = freshIp();
    const before = await clients();
    const answers: HttpResult[] = [];
    for (let i = 0; i < BUDGET + 10; i++) answers.push(await register(instances[i % 2]!.origin, ip));
    expect(answers.map((a) => a.status)).toEqual([...Array(BUDGET).fill(201), ...Array(10).fill(429)]);
    // Each instance refused five, after letting thirty through: one budget, not one each.
    const refused = answers[BUDGET]!;
    expect(refused.json).toEqual({ error: "invalid_request", error_description: expect.stringMatching(/^Too many registrations from this address/) });
    // One registration comes back every second (60 a minute).
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(await clients()).toBe(before + BUDGET);

    clock.advance(1000);
    expect((await register(instances[1].origin, ip)).status).toBe(201);
    expect((await register(instances[0].origin, ip)).status).toBe(429);
    // Another address has its own budget.
    expect((await register(instances[0].origin, freshIp())).status).toBe(201);
  });

  it("registrations sent to both at once take exactly the shared budget", async () => {
    const ip = freshIp();
    const statuses = await Promise.all(Array.from({ length: BUDGET + 20 }, (_, i) => register(instances[i % 2]!.origin, ip).then((a) => a.status)));
    expect(statuses.filter((s) => s === 201)).toHaveLength(BUDGET);
    expect(statuses.filter((s) => s === 429)).toHaveLength(20);
  });

  it("the sweep on either instance removes the buckets that are full again, and only those", async () => {
    const ip = freshIp();
    expect((await register(instances[0].origin, ip)).status).toBe(201);
    const buckets = () => instances[1].broker.database.db.rateLimitBucket.count();
    const before = await buckets();
    // The bucket just used is one token short for one second; the earlier tests' are further behind.
    clock.advance(999);
    const early = await instances[1].broker.services.grants.sweep();
    expect(await buckets()).toBe(before - early.rateLimitBuckets);
    expect(await buckets()).toBeGreaterThan(0);
    clock.advance(REGISTRATION_RATE_LIMIT.windowMs);
    expect((await instances[1].broker.services.grants.sweep()).rateLimitBuckets).toBe(before - early.rateLimitBuckets);
    expect(await buckets()).toBe(0);
    // No row is a full bucket.
    const statuses: number[] = [];
    for (let i = 0; i <= BUDGET; i++) statuses.push((await register(instances[i % 2]!.origin, ip)).status);
    expect(statuses).toEqual([...Array(BUDGET).fill(201), 429]);
  });

  it("a database fault while counting answers 503 temporarily_unavailable with Retry-After: never a 500, nothing registered", async () => {
    const { db } = instances[0].broker.database;
    const before = await clients();
    // The count's statement fails (its table is gone for a moment); the rest of the database works.
    await db.$executeRawUnsafe('ALTER TABLE "RateLimitBucket" RENAME TO "RateLimitBucketAway"');
    try {
      for (const instance of instances) {
        const answer = await register(instance.origin, freshIp());
        expect(answer.status).toBe(503);
        expect(answer.headers.get("retry-after")).toBe("5");
        expect(answer.json).toEqual({ error: "temporarily_unavailable", error_description: expect.stringMatching(/try again in a few seconds/) });
      }
    } finally {
      await db.$executeRawUnsafe('ALTER TABLE "RateLimitBucketAway" RENAME TO "RateLimitBucket"');
    }
    expect(await clients()).toBe(before);
    expect((await register(instances[1].origin, freshIp())).status).toBe(201);
  });
});

describe("a broker process and a broker in this process on one SQLite file", () => {
  let dir: string;
  let inProcess: TestBroker;
  let child: BrokerProcess;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-ratelimit-"));
    const file = path.join(dir, "broker.db");
    await copyMigratedSqlite(file);
    const shared = { DATABASE_URL: `file:${file}`, SECRET_KEY: randomBytes(32).toString("base64"), MCP_SERVER_URL: mcpServer.url, TRUST_PROXY: "true" };
    [inProcess, child] = await Promise.all([startBroker(shared, { migrate: false }), startBrokerProcess(dir, shared)]);
  }, 60_000);
  afterAll(async () => {
    await child?.kill();
    await inProcess?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Registrations from `ip` at `origin` answered 201 before the first 429. */
  const drain = async (origin: string, ip: string): Promise<number> => {
    let accepted = 0;
    while ((await register(origin, ip)).status === 201) accepted++;
    return accepted;
  };

  it("share one budget: once one has spent it, the other lets through only what refilled meanwhile", async () => {
    // Both on the system clock here: the bucket refills one a second while the requests go out, so
    // the bound allows one per second elapsed. With a budget each, the second would add 60 more.
    for (const [spender, other] of [
      [inProcess.origin, child.url],
      [child.url, inProcess.origin],
    ] as const) {
      const ip = freshIp();
      const started = performance.now();
      const spent = await drain(spender, ip);
      const more = await drain(other, ip);
      const seconds = (performance.now() - started) / 1000;
      expect(spent).toBeGreaterThanOrEqual(BUDGET);
      expect(spent + more).toBeLessThanOrEqual(BUDGET + Math.ceil(seconds) + 1);
    }
  });
});
