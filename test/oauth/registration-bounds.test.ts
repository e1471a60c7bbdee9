// Storage of registrations nobody uses stays bounded, without a per-address cap: /register is open,
// every connection attempt of claude.ai registers twice from a few shared egress addresses, and a
// per-address cap would refuse its users. Never-used self-registrations (no grant, never at the
// token endpoint) live an hour, and beyond DYNAMIC_REGISTRATION_MAX_UNUSED the oldest go first;
// a client in use, the operator's, or one whose sign-in is under way never goes.
import { afterEach, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, obtainTokens, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { insertClient } from "../support/grants-harness.ts";
import { s256Challenge } from "../../src/grants/pkce.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { loadConfig } from "../../src/config/load.ts";

let t: TestBroker | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

const exists = async (id: string) => (await t!.broker.database.db.client.count({ where: { id } })) === 1;

describe("beyond DYNAMIC_REGISTRATION_MAX_UNUSED", () => {
  it("the oldest never-used registrations are removed, with their audit event; clients in use and the operator's stay", async () => {
    t = await startBroker({ DYNAMIC_REGISTRATION_MAX_UNUSED: "4" });
    const { db } = t.broker.database;
    // In use: a grant and tokens; a grant whose code is not redeemed yet; the operator's client.
    const used = await obtainTokens(t.url, { user: "alice" });
    const signingIn = await registerClient(t.url);
    const { callback } = await authorize(t.url, signingIn, { user: "bob" });
    expect(callback.searchParams.get("code")).toEqual(expect.any(String));
    const operators = await insertClient(t.broker.database);

    const fresh: string[] = [];
    for (let i = 0; i < 7; i++) fresh.push((await registerClient(t.url)).client_id);
    const never = await db.client.count({ where: { registrationType: "dynamic", lastUsedAt: null, grants: { none: {} } } });
    expect(never).toBeLessThanOrEqual(4);
    // The newest stay, oldest first out.
    for (const id of fresh.slice(-3)) expect(await exists(id)).toBe(true);
    for (const id of fresh.slice(0, 3)) expect(await exists(id)).toBe(false);
    expect(await db.auditEvent.count({ where: { type: "client.registered", clientId: { in: fresh.slice(0, 3) } } })).toBe(0);

    for (const id of [used.client.client_id, signingIn.client_id, operators.id]) expect(await exists(id)).toBe(true);
    const refresh = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: used.tokens.refresh_token, client_id: used.client.client_id });
    expect(refresh.status).toBe(200);
    // The sweep's event says how many went this way.
    expect((await t.broker.services.grants.sweep()).evictedClients).toBeGreaterThanOrEqual(3);
  }, 30_000);

  it("is read from the environment with a clear error", () => {
    const env = { SECRET_KEY: "a".repeat(64) };
    expect(loadConfig(env).unusedRegistrations).toEqual({ max: 10_000, lifetimeSeconds: 3600 });
    expect(loadConfig({ ...env, DYNAMIC_REGISTRATION_MAX_UNUSED: "50", DYNAMIC_REGISTRATION_UNUSED_SECONDS: "900" }).unusedRegistrations).toEqual({
      max: 50,
      lifetimeSeconds: 900,
    });
    expect(() => loadConfig({ ...env, DYNAMIC_REGISTRATION_MAX_UNUSED: "none" })).toThrow(
      /^DYNAMIC_REGISTRATION_MAX_UNUSED: expected a whole number between 1 and 10000000, got "none"$/,
    );
    expect(() => loadConfig({ ...env, DYNAMIC_REGISTRATION_UNUSED_SECONDS: "60" })).toThrow(/^DYNAMIC_REGISTRATION_UNUSED_SECONDS: expected/);
  });
});

describe("the sweep of never-used registrations", () => {
  it("removes them an hour after registration, unless a sign-in with one is under way", async () => {
    const clock = new ManualClock();
    t = await startBroker({}, { clock });
    const used = await obtainTokens(t.url, { user: "alice" });
    const idle = await registerClient(t.url);
    const late = await registerClient(t.url);

    clock.advance(55 * 60_000);
    // 55 minutes later a sign-in starts with the second: its authorization waits 10 minutes.
    const started = new URL(`${t.url}/authorize`);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: late.client_id,
      redirect_uri: late.redirect_uri,
      code_challenge: s256Challenge(randomBytes(32).toString("base64url")),
      code_challenge_method: "S256",
      state: "s",
      resource: `${t.url}/mcp`,
    }))
      started.searchParams.set(k, v);
    expect((await fetch(started, { redirect: "manual" })).status).toBeLessThan(400);
    expect(await t.broker.database.db.authTransaction.count({ where: { clientId: late.client_id } })).toBe(1);

    expect((await t.broker.services.grants.sweep()).unusedClients).toBe(0);
    clock.advance(6 * 60_000);
    expect((await t.broker.services.grants.sweep()).unusedClients).toBe(1);
    expect(await exists(idle.client_id)).toBe(false);
    expect(await exists(late.client_id)).toBe(true);
    expect(await exists(used.client.client_id)).toBe(true);
    // Once its sign-in has expired unfinished, it goes too.
    clock.advance(10 * 60_000);
    expect((await t.broker.services.grants.sweep()).unusedClients).toBe(1);
    expect(await exists(late.client_id)).toBe(false);
    expect(await exists(used.client.client_id)).toBe(true);
  }, 30_000);
});
