// The broker's signing keys on both databases: one key per rotation period, published before it
// signs and after it stops, so that every assertion stays verifiable until it expires; instances
// reaching a period together make one key; private keys are stored encrypted; a key written under
// a SECRET_KEY that is gone is replaced, not used.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { decodeProtectedHeader, jwtVerify, createLocalJWKSet, type JWK } from "jose";
import { databaseTargets } from "../support/database-targets.ts";
import { openDatabase, type Database } from "../../src/store/db.ts";
import { SecretBox } from "../../src/store/secrets.ts";
import { ManualClock } from "../../src/lib/clock.ts";
import { SigningKeys, type SigningKeySchedule } from "../../src/grants/signing-keys.ts";
import { IdentityAssertions, ASSERTION_LIFETIME_SECONDS } from "../../src/grants/identity-assertion.ts";
import type { CallerIdentity } from "../../src/grants/caller-identity.ts";

const HOUR = 3_600_000;
const SCHEDULE: SigningKeySchedule = { rotationMs: 24 * HOUR, leadMs: HOUR, overlapMs: HOUR };
/** The start of a rotation period (periods are counted from the epoch). */
const PERIOD_START = 20_000 * SCHEDULE.rotationMs;

const identity: CallerIdentity = {
  subject: "oidc:ada",
  user: "ada",
  clientId: "client-1",
  scopes: ["mcp"],
  grantId: "grant-1",
  facts: { subject: "oidc:ada", login: "ada", verifiedEmails: ["ada@example.com"] },
};

const moveTo = (clock: ManualClock, at: number) => clock.advance(at - clock.now());
const kids = (keys: JWK[]) => keys.map((k) => k.kid).sort();

describe.each(databaseTargets("signing key tests"))("signing keys on $name", (target) => {
  let database: Database;
  let cleanup: () => Promise<void>;
  const box = new SecretBox(randomBytes(32));
  beforeAll(async () => {
    const setup = await target.setup();
    cleanup = setup.cleanup;
    database = await openDatabase(setup.url);
  });
  afterAll(async () => {
    await database.close();
    await cleanup();
  });
  const fresh = async () => database.db.signingKey.deleteMany({});

  it("publishes the public half only, and stores the private half encrypted", async () => {
    await fresh();
    const keys = new SigningKeys(database.db, box, new ManualClock(PERIOD_START + 2 * HOUR), SCHEDULE);
    const signing = await keys.signing();
    const published = await keys.published();
    expect(published).toEqual([expect.objectContaining({ kid: signing.kid, kty: "EC", crv: "P-256", alg: "ES256", use: "sig" })]);
    expect(published[0]).not.toHaveProperty("d");
    const [row] = await database.db.signingKey.findMany();
    expect(row?.privateJwk.split(".")).toHaveLength(5);
    expect(row?.privateJwk).not.toContain('"d"');
  });

  it("rotates with overlap: the next key is published before it signs, the last stays until its assertions expire", async () => {
    await fresh();
    const clock = new ManualClock(PERIOD_START + 2 * HOUR);
    const keys = new SigningKeys(database.db, box, clock, SCHEDULE);
    const assertions = new IdentityAssertions(keys, "https://broker.example", clock);
    const first = await keys.signing();

    moveTo(clock, PERIOD_START + SCHEDULE.rotationMs - SCHEDULE.leadMs);
    const ahead = await keys.published();
    expect(ahead).toHaveLength(2);
    expect((await keys.signing()).kid).toBe(first.kid);
    const next = ahead.find((k) => k.kid !== first.kid)!;
    moveTo(clock, PERIOD_START + SCHEDULE.rotationMs - 1000);
    const old = await assertions.for(identity, "https://broker.example/mcp/docs");

    moveTo(clock, PERIOD_START + SCHEDULE.rotationMs + 1);
    expect((await keys.signing()).kid).toBe(next.kid);
    const during = await keys.published();
    expect(kids(during)).toEqual(kids(ahead));
    // An assertion the old key signed just before the switch still verifies against what is published.
    const verified = await jwtVerify(old, createLocalJWKSet({ keys: during }), {
      currentDate: new Date(clock.now()),
      clockTolerance: ASSERTION_LIFETIME_SECONDS * 2,
    });
    expect(verified.protectedHeader.kid).toBe(first.kid);

    moveTo(clock, PERIOD_START + SCHEDULE.rotationMs + SCHEDULE.overlapMs);
    expect(kids(await keys.published())).toEqual([next.kid]);
    // Two periods on, the first key is gone from the store too.
    moveTo(clock, PERIOD_START + 2 * SCHEDULE.rotationMs + SCHEDULE.overlapMs);
    await keys.signing();
    expect(await database.db.signingKey.count({ where: { id: first.kid } })).toBe(0);
  });

  it("two instances reaching a period together make one key and sign with it", async () => {
    await fresh();
    const clock = new ManualClock(PERIOD_START + 3 * HOUR);
    const [a, b] = [new SigningKeys(database.db, box, clock, SCHEDULE), new SigningKeys(database.db, box, clock, SCHEDULE)];
    const [ka, kb] = await Promise.all([a.signing(), b.signing()]);
    expect(ka.kid).toBe(kb.kid);
    expect(await database.db.signingKey.count()).toBe(1);
  });

  it("a key written under a SECRET_KEY that is gone is replaced, never used", async () => {
    await fresh();
    const clock = new ManualClock(PERIOD_START + 4 * HOUR);
    const before = await new SigningKeys(database.db, box, clock, SCHEDULE).signing();
    const after = await new SigningKeys(database.db, new SecretBox(randomBytes(32)), clock, SCHEDULE).signing();
    expect(after.kid).not.toBe(before.kid);
    expect((await database.db.signingKey.findMany()).map((r) => r.id)).toEqual([after.kid]);
  });

  it("assert iss, aud, sub, client_id, scope, login, e-mail, a 60-second life and a jti; reused for half that life", async () => {
    await fresh();
    const clock = new ManualClock(PERIOD_START + HOUR);
    const keys = new SigningKeys(database.db, box, clock, SCHEDULE);
    const assertions = new IdentityAssertions(keys, "https://broker.example", clock);
    const jwt = await assertions.for(identity, "https://broker.example/mcp/docs");
    const { payload } = await jwtVerify(jwt, createLocalJWKSet({ keys: await keys.published() }), {
      issuer: "https://broker.example",
      audience: "https://broker.example/mcp/docs",
      currentDate: new Date(clock.now()),
    });
    expect(payload).toMatchObject({ sub: "oidc:ada", client_id: "client-1", scope: "mcp", login: "ada", email: "ada@example.com" });
    expect(payload.exp! - payload.iat!).toBe(ASSERTION_LIFETIME_SECONDS);
    expect(payload.jti).toMatch(/^[\w-]{22}$/);
    expect(decodeProtectedHeader(jwt)).toMatchObject({ alg: "ES256", typ: "JWT" });

    clock.advance(29_000);
    expect(await assertions.for(identity, "https://broker.example/mcp/docs")).toBe(jwt);
    expect(await assertions.for(identity, "https://broker.example/mcp/other")).not.toBe(jwt);
    clock.advance(1_000);
    expect(await assertions.for(identity, "https://broker.example/mcp/docs")).not.toBe(jwt);
  });

  it("a server's assertions: the same identity object gets the last one as a plain string while it is reused, nobody else does", async () => {
    await fresh();
    const clock = new ManualClock(PERIOD_START + 5 * HOUR);
    const keys = new SigningKeys(database.db, box, clock, SCHEDULE);
    const assertions = new IdentityAssertions(keys, "https://broker.example", clock);
    const docs = assertions.forAudience("https://broker.example/mcp/docs");
    const first = docs(identity);
    expect(first).toBeInstanceOf(Promise);
    const jwt = await first;
    const verify = async (token: string, audience = "https://broker.example/mcp/docs") =>
      (await jwtVerify(token, createLocalJWKSet({ keys: await keys.published() }), { audience, currentDate: new Date(clock.now()) })).payload;
    expect(await verify(jwt)).toMatchObject({ sub: "oidc:ada", scope: "mcp" });
    clock.advance(29_000);
    // No promise, no signing: the value itself.
    expect(docs(identity)).toBe(jwt);
    // Another server's function: its own audience, never this one's assertion.
    const other = await assertions.forAudience("https://broker.example/mcp/other")(identity);
    expect(other).not.toBe(jwt);
    expect(await verify(other, "https://broker.example/mcp/other")).toMatchObject({ sub: "oidc:ada" });
    // Another user's identity (another grant, other scopes) gets its own, naming them.
    const grace: CallerIdentity = {
      ...identity,
      subject: "oidc:grace",
      user: "grace",
      grantId: "grant-2",
      scopes: ["mcp", "admin"],
      facts: { subject: "oidc:grace", login: "grace" },
    };
    const graces = await docs(grace);
    expect(graces).not.toBe(jwt);
    expect(await verify(graces)).toMatchObject({ sub: "oidc:grace", login: "grace", scope: "mcp admin" });
    // Half the life gone: signed anew.
    clock.advance(1_000);
    const renewed = docs(identity);
    expect(renewed).toBeInstanceOf(Promise);
    expect(await renewed).not.toBe(jwt);
  });
});
