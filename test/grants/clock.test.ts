// Every time decision of the grants code reads the injected clock: tests move it and never sleep.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { insertClient, machineGrantsHarness, presented, type GrantsHarness } from "../support/grants-harness.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { CredentialRejected } from "../../src/grants/errors.ts";
import type { RegisteredClient } from "../../src/grants/types.ts";

describe("ManualClock", () => {
  it("stands still until moved, and only moves forward", () => {
    const clock = new ManualClock(new Date("2030-01-01T00:00:00Z"));
    expect(clock.now()).toBe(Date.parse("2030-01-01T00:00:00Z"));
    clock.advance(1500);
    expect(clock.now()).toBe(Date.parse("2030-01-01T00:00:01.500Z"));
    expect(() => clock.advance(-1)).toThrow(RangeError);
  });
});

describe("grants on a manual clock", () => {
  let h: GrantsHarness;
  let service: RegisteredClient;
  const clock = new ManualClock();
  const issue = () => h.grants.tokens.grant(presented(service), { grant_type: "client_credentials" });

  beforeAll(async () => {
    h = await machineGrantsHarness({ ACCESS_TOKEN_TTL_SECONDS: "60", SESSION_IDLE_TIMEOUT_SECONDS: "600", SESSION_MAX_AGE_SECONDS: "900" }, { clock });
    service = await insertClient(h.database);
  });
  afterAll(async () => h.close());

  it("stamps rows with the clock's time and counts expires_in from it", async () => {
    const res = await issue();
    expect(res.expires_in).toBe(60);
    const row = await h.database.db.accessToken.findFirstOrThrow({ where: { clientId: service.id }, orderBy: { createdAt: "desc" } });
    expect(row.expiresAt.getTime()).toBe(clock.now() + 60_000);
    const grant = await h.database.db.grant.findUniqueOrThrow({ where: { id: row.grantId } });
    expect(grant.absoluteExpiresAt.getTime()).toBe(clock.now() + 900_000);
  });

  it("ends an access token, cached or not, when the clock passes its expiry", async () => {
    const { access_token } = await issue();
    await h.grants.validator.validate(access_token);
    clock.advance(59_000);
    await expect(h.grants.validator.validate(access_token)).resolves.toMatchObject({ clientId: service.id });
    clock.advance(1_000);
    await expect(h.grants.validator.validate(access_token)).rejects.toThrow(new CredentialRejected("the access token expired"));
    await expect(h.grants.tokens.introspect(service, { token: access_token })).resolves.toEqual({ active: false });
  });

  it("times out an idle grant by the clock: the sweep revokes it", async () => {
    const { access_token } = await issue();
    const { grantId } = await h.grants.validator.validate(access_token);
    await h.grants.usage.flush();
    const grant = () => h.database.db.grant.findUniqueOrThrow({ where: { id: grantId } });
    clock.advance(599_000);
    await h.grants.sweep();
    expect((await grant()).revokedAt).toBeNull();
    clock.advance(1_000);
    await h.grants.sweep();
    expect(await grant()).toMatchObject({ revokedAt: new Date(clock.now()), revokedReason: "idle_timeout" });
  });
});
