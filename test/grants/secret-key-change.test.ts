// Upstream tokens are stored encrypted under SECRET_KEY. When the key changes without the old one in
// SECRET_KEY_PREVIOUS, or a stored value no longer decrypts, the grants standing on those tokens
// end — the README's promise, "every upstream session must sign in again": 401 with the endpoint's
// challenge at /mcp and invalid_grant at /token, which make clients sign in again, instead of a
// 500 on every retry. At start this is found without decrypting anything and said in one warning.
import { afterEach, describe, expect, it, jest } from "@jest/globals";
import { randomBytes, randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { SecretBox } from "../../src/store/secrets.ts";
import { machineGrantsHarness } from "../support/grants-harness.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens, tokenRequest } from "../support/oauth-flow.ts";

interface LogLine {
  readonly level: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

/** A log destination that keeps the lines. */
function logSink(): { lines: LogLine[]; destination: { write(text: string): void } } {
  const lines: LogLine[] = [];
  return {
    lines,
    destination: {
      write(text: string) {
        for (const part of text.split("\n")) if (part) lines.push(JSON.parse(part) as LogLine);
      },
    },
  };
}

const key = () => randomBytes(32).toString("base64");

async function mcp(t: TestBroker, accessToken: string): Promise<Response> {
  return fetch(`${t.url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 1,
      method: "initialize",
      params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
    }),
  });
}

async function expectSignInAgain(t: TestBroker, grant: Awaited<ReturnType<typeof obtainTokens>>): Promise<void> {
  const res = await mcp(t, grant.tokens.access_token);
  expect(res.status).toBe(401);
  const challenge = res.headers.get("www-authenticate") ?? "";
  expect(challenge).toContain(`resource_metadata="${t.url}/.well-known/oauth-protected-resource/mcp"`);
  expect(challenge).toContain('error="invalid_token"');
  const refresh = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: grant.tokens.refresh_token, client_id: grant.client.client_id });
  expect(refresh.status).toBe(400);
  expect(refresh.body.error).toBe("invalid_grant");
}

const endedLines = (lines: LogLine[]) => lines.filter((l) => /grant\(s\) ended/.test(l.msg));

describe("a restart with another SECRET_KEY", () => {
  const started: TestBroker[] = [];
  let dir: string | undefined;
  afterEach(async () => {
    for (const t of started.splice(0)) await t.stop({ keepDir: true }).catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it("ends the grants it cannot read at start, with one warning naming how many, and only once", async () => {
    const keyA = key();
    const first = await startBroker({ SECRET_KEY: keyA });
    started.push(first);
    dir = first.dir;
    const alice = await obtainTokens(first.url, { user: "alice" });
    const bob = await obtainTokens(first.url, { user: "bob" });
    await started.pop()!.stop({ keepDir: true });

    const sameDatabase = { DATABASE_URL: `file:${dir}/broker.db`, PORT: new URL(first.url).port, PUBLIC_URL: first.url, LOG_LEVEL: "info" };
    // The rotation the README describes: the old key kept for reading. Nothing ends.
    const keyB = key();
    const rotatedLog = logSink();
    const rotated = await startBroker({ ...sameDatabase, SECRET_KEY: keyB, SECRET_KEY_PREVIOUS: keyA }, { logDestination: rotatedLog.destination });
    started.push(rotated);
    expect((await mcp(rotated, alice.tokens.access_token)).status).toBe(200);
    expect(endedLines(rotatedLog.lines)).toEqual([]);
    await started.pop()!.stop({ keepDir: true });

    // The old key dropped too early: what was written under it cannot be read any more.
    const keyC = key();
    const changedLog = logSink();
    const changed = await startBroker({ ...sameDatabase, SECRET_KEY: keyC }, { logDestination: changedLog.destination });
    started.push(changed);
    expect(endedLines(changedLog.lines)).toEqual([expect.objectContaining({ level: 40, grants: 2, upstreamSessions: 2 })]);
    await expectSignInAgain(changed, alice);
    await expectSignInAgain(changed, bob);
    const { db } = changed.broker.database;
    const unreadable = await db.auditEvent.findMany({ where: { type: "upstream.unreadable" }, orderBy: { subject: "asc" } });
    expect(unreadable.map((e) => e.subject)).toEqual(["demo:alice", "demo:bob"]);
    const revoked = await db.auditEvent.findMany({ where: { type: "grant.revoked" } });
    expect(revoked.map((e) => JSON.parse(e.detail) as { reason: string })).toEqual([{ reason: "upstream_unreadable" }, { reason: "upstream_unreadable" }]);
    // Signing in again works under the new key.
    const again = await obtainTokens(changed.url, { user: "alice" });
    expect((await mcp(changed, again.tokens.access_token)).status).toBe(200);
    await started.pop()!.stop({ keepDir: true });

    // The next start on the same key finds nothing left to end: no second warning.
    const nextLog = logSink();
    const next = await startBroker({ ...sameDatabase, SECRET_KEY: keyC }, { logDestination: nextLog.destination });
    started.push(next);
    expect(endedLines(nextLog.lines)).toEqual([]);
    expect((await mcp(next, again.tokens.access_token)).status).toBe(200);
  }, 60_000);
});

describe("a stored upstream token that no longer decrypts while the broker runs", () => {
  let t: TestBroker | undefined;
  afterEach(async () => {
    await t?.stop();
  });

  it("ends its grant: 401 at /mcp, invalid_grant at refresh, an audit event, never a 500", async () => {
    // A check on every use: each request reads the stored token.
    t = await startBroker({ UPSTREAM_RECHECK_SECONDS: "0" });
    const grant = await obtainTokens(t.url, { user: "carol" });
    expect((await mcp(t, grant.tokens.access_token)).status).toBe(200);
    const { db } = t.broker.database;
    const session = await db.upstreamSession.findFirstOrThrow({ where: { subject: "demo:carol" } });
    // One character of the ciphertext changed: the key id is known, the authentication fails.
    const parts = session.accessTokenEnc.split(".");
    parts[3] = (parts[3]!.startsWith("A") ? "B" : "A") + parts[3]!.slice(1);
    await db.upstreamSession.update({ where: { id: session.id }, data: { accessTokenEnc: parts.join(".") } });

    await expectSignInAgain(t, grant);
    expect(await db.auditEvent.count({ where: { type: "upstream.unreadable", subject: "demo:carol" } })).toBe(1);
    expect(await db.grant.findFirst({ where: { subject: "demo:carol" } })).toMatchObject({ revokedReason: "upstream_unreadable" });
  }, 30_000);
});

describe("the search at start on a large database", () => {
  it("decrypts nothing, and ends only the sessions written under a key it does not have", async () => {
    const h = await machineGrantsHarness();
    try {
      const now = new Date();
      const row = (accessTokenEnc: string, refreshTokenEnc: string | null) => ({
        id: randomUUID(),
        provider: "github",
        subject: `github:${randomUUID()}`,
        profile: "{}",
        accessTokenEnc,
        refreshTokenEnc,
        lastCheckedAt: now,
        status: "active",
      });
      const readable = await h.secrets.encrypt("gho_readable");
      const foreign = await new SecretBox(randomBytes(32)).encrypt("gho_foreign");
      await h.database.db.upstreamSession.createMany({
        data: [
          ...Array.from({ length: 1500 }, () => row(readable, readable)),
          // Only one of its values under the other key is enough: the session cannot be used.
          ...Array.from({ length: 120 }, () => row(readable, foreign)),
          ...Array.from({ length: 80 }, () => row(foreign, null)),
        ],
      });
      const decrypt = jest.spyOn(h.secrets, "decrypt");
      const canRead = jest.spyOn(h.secrets, "canRead");
      const ended = await h.grants.sessions.endUnreadable();
      expect(ended).toEqual({ sessions: 200, grants: 0, keyIds: [expect.any(String)] });
      expect(decrypt).not.toHaveBeenCalled();
      // The query brought back only the rows a configured key did not write, not the 1,500 others.
      expect(canRead.mock.calls.length).toBeLessThanOrEqual(200 * 2);
      expect(await h.database.db.upstreamSession.count({ where: { status: "active" } })).toBe(1500);
      expect(await h.database.db.upstreamSession.count({ where: { revokedReason: "upstream_unreadable" } })).toBe(200);
    } finally {
      await h.close();
    }
  });
});
