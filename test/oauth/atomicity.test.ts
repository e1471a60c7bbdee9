// Every state change of one step happens in one database transaction. A failure
// injected at the last statement of a step (a database trigger refusing its audit row, as a crash
// or a lost connection would) must leave nothing half done: the code is still unused, the refresh
// token not rotated, no login half-stored, and the same request succeeds once the fault is gone.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { authorize, registerClient, tokenRequest, type RegisteredTestClient } from "../support/oauth-flow.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { databaseTargets } from "../support/database-targets.ts";
import { hashPresentedToken } from "../../src/grants/token-format.ts";

interface Fault {
  inject(auditType: string): Promise<void>;
  clear(): Promise<void>;
}

function faultFor(t: TestBroker, kind: "sqlite" | "postgres"): Fault {
  const db = t.broker.database.db;
  if (kind === "sqlite") {
    return {
      inject: async (type) =>
        void (await db.$executeRawUnsafe(
          `CREATE TRIGGER injected_fault BEFORE INSERT ON "AuditEvent" WHEN NEW.type = '${type}' BEGIN SELECT RAISE(ABORT, 'injected fault'); END`,
        )),
      clear: async () => void (await db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS injected_fault`)),
    };
  }
  return {
    async inject(type) {
      await db.$executeRawUnsafe(
        `CREATE OR REPLACE FUNCTION injected_fault() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'injected fault'; END $$ LANGUAGE plpgsql`,
      );
      await db.$executeRawUnsafe(
        `CREATE TRIGGER injected_fault BEFORE INSERT ON "AuditEvent" FOR EACH ROW WHEN (NEW.type = '${type}') EXECUTE FUNCTION injected_fault()`,
      );
    },
    clear: async () => void (await db.$executeRawUnsafe(`DROP TRIGGER IF EXISTS injected_fault ON "AuditEvent"`)),
  };
}

describe.each(databaseTargets("atomicity tests"))("a step that fails at its last write changes nothing ($name)", (target) => {
  let t: TestBroker;
  let fault: Fault;
  let client: RegisteredTestClient;
  let cleanup: () => Promise<void>;
  beforeAll(async () => {
    const database = await target.setup();
    cleanup = database.cleanup;
    t = await startBroker({ DATABASE_URL: database.url, SECRET_KEY: randomBytes(32).toString("base64") });
    fault = faultFor(t, target.name);
    client = await registerClient(t.url);
  }, 60_000);
  afterAll(async () => {
    await t.stop();
    await cleanup();
  });

  async function codeExchangeForm() {
    const { callback, verifier } = await authorize(t.url, client, { scope: "mcp offline_access" });
    return {
      grant_type: "authorization_code",
      code: callback.searchParams.get("code")!,
      code_verifier: verifier,
      redirect_uri: client.redirect_uri,
      client_id: client.client_id,
    };
  }

  it("code exchange: the code stays unused, no token exists, and the retry succeeds", async () => {
    const form = await codeExchangeForm();
    const db = t.broker.database.db;
    const code = () => db.authorizationCode.findUniqueOrThrow({ where: { codeHash: hashPresentedToken(form.code) } });
    const grantId = (await code()).grantId;
    await fault.inject("token.issued");
    try {
      const failed = await tokenRequest(t.url, form);
      expect(failed.status).toBe(500);
      expect(failed.body.error).toBe("server_error");
    } finally {
      await fault.clear();
    }
    expect((await code()).consumedAt).toBeNull();
    expect(await db.accessToken.count({ where: { grantId } })).toBe(0);
    expect(await db.refreshToken.count({ where: { grantId } })).toBe(0);

    const retried = await tokenRequest(t.url, form);
    expect(retried.status).toBe(200);
    expect((await db.grant.findUniqueOrThrow({ where: { id: grantId } })).revokedAt).toBeNull();
  });

  it("refresh: the token is not rotated, has no successor, and the retry rotates it once", async () => {
    const issued = await tokenRequest(t.url, await codeExchangeForm());
    const refreshToken = String(issued.body.refresh_token);
    const db = t.broker.database.db;
    const row = () => db.refreshToken.findUniqueOrThrow({ where: { tokenHash: hashPresentedToken(refreshToken) } });
    const grantId = (await row()).grantId;
    const form = { grant_type: "refresh_token", refresh_token: refreshToken, client_id: client.client_id };
    await fault.inject("token.refreshed");
    try {
      expect((await tokenRequest(t.url, form)).status).toBe(500);
    } finally {
      await fault.clear();
    }
    expect(await row()).toMatchObject({ consumedAt: null, successorId: null, graceUntil: null });
    expect(await db.refreshToken.count({ where: { grantId } })).toBe(1);
    expect(await db.accessToken.count({ where: { grantId } })).toBe(1);

    const retried = await tokenRequest(t.url, form);
    expect(retried.status).toBe(200);
    expect((await row()).successorId).not.toBeNull();
    expect(await db.refreshToken.count({ where: { grantId } })).toBe(2);
    expect((await db.grant.findUniqueOrThrow({ where: { id: grantId } })).revokedAt).toBeNull();
  });

  it("upstream callback: no upstream session, grant or code is left behind", async () => {
    const db = t.broker.database.db;
    const fresh = await registerClient(t.url);
    const sessionsBefore = await db.upstreamSession.count();
    await fault.inject("login.completed");
    try {
      await expect(authorize(t.url, fresh)).rejects.toThrow(/status 500/);
    } finally {
      await fault.clear();
    }
    expect(await db.upstreamSession.count()).toBe(sessionsBefore);
    expect(await db.grant.count({ where: { clientId: fresh.client_id } })).toBe(0);
    expect(await db.authorizationCode.count({ where: { clientId: fresh.client_id } })).toBe(0);
    expect(await db.authTransaction.count({ where: { clientId: fresh.client_id, status: "completed" } })).toBe(0);
    // A new attempt goes through.
    const again = await authorize(t.url, fresh);
    expect(again.callback.searchParams.get("code")).toBeTruthy();
  });
});
