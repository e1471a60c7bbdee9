// An answer sent is an answer stored. The broker process is killed (SIGKILL, as a crash
// or `kill -9`) in the middle of refresh load and started again on the same database: every refresh
// token it answered works (or, when a request still in flight at the kill had rotated it, is
// reported as rotated by giving back that rotation's pair within the grace window), every chain
// goes on, and no rotation is left half written.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { openDatabase } from "../../src/store/db.ts";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { databaseTargets } from "../support/database-targets.ts";
import { obtainTokens, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { mcpStatus } from "../support/mcp-probe.ts";

const CHAINS = 6;
/** Refreshes answered (over all chains) before the kill. */
const ANSWERED_BEFORE_KILL = 120;

interface Chain {
  readonly clientId: string;
  /** The newest refresh token the broker answered with. */
  lastAnswered: string;
}

describe.each(databaseTargets("durability tests"))("kill -9 under refresh load ($name)", (target) => {
  let dir: string;
  let url: string;
  let cleanup: () => Promise<void>;
  const secretKey = randomBytes(32).toString("base64");
  // A refresh committed but not answered before the kill leaves the answered token in its grace;
  // the restart must come within it however slow the machine is, so the grace is long here.
  const grace = { REFRESH_GRACE_SECONDS: "3600" };
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-durability-"));
    const setup = await target.setup();
    url = setup.url;
    cleanup = setup.cleanup;
  });
  afterAll(async () => {
    await cleanup?.();
    rmSync(dir, { recursive: true, force: true });
  });

  it("every answered refresh token still works after a restart, and no rotation is half written", async () => {
    let broker: BrokerProcess = await startBrokerProcess(dir, { DATABASE_URL: url, SECRET_KEY: secretKey, ...grace });
    const port = new URL(broker.url).port;
    try {
      const chains: Chain[] = [];
      for (let i = 0; i < CHAINS; i++) {
        const { client, tokens } = await obtainTokens(broker.url, { user: `user${i}`, client: await registerClient(broker.url) });
        chains.push({ clientId: client.client_id, lastAnswered: tokens.refresh_token });
      }

      // Load: every chain refreshes back to back; the process is killed once enough were answered,
      // with requests of every chain still in flight.
      let answered = 0;
      let killed: Promise<void> | undefined;
      const refreshes = chains.map(async (chain) => {
        for (;;) {
          let res: Awaited<ReturnType<typeof tokenRequest>>;
          try {
            res = await tokenRequest(broker.url, { grant_type: "refresh_token", refresh_token: chain.lastAnswered, client_id: chain.clientId });
          } catch {
            return; // the connection died with the process
          }
          if (res.status !== 200) throw new Error(`refresh failed before the kill: ${res.status} ${JSON.stringify(res.body)}`);
          chain.lastAnswered = String(res.body.refresh_token);
          if (++answered === ANSWERED_BEFORE_KILL) killed = broker.kill();
        }
      });
      await Promise.all(refreshes);
      await killed;
      expect((await broker.exited).signal).toBe("SIGKILL");

      // Same port and public URL: the tokens' resource is the broker's /mcp.
      broker = await startBrokerProcess(dir, { DATABASE_URL: url, SECRET_KEY: secretKey, PORT: port, PUBLIC_URL: `http://127.0.0.1:${port}`, ...grace });
      const base = `http://127.0.0.1:${port}`;
      for (const chain of chains) {
        const first = await tokenRequest(base, { grant_type: "refresh_token", refresh_token: chain.lastAnswered, client_id: chain.clientId });
        expect(first).toMatchObject({ status: 200 });
        // The chain goes on from whatever the store holds.
        const second = await tokenRequest(base, { grant_type: "refresh_token", refresh_token: String(first.body.refresh_token), client_id: chain.clientId });
        expect(second).toMatchObject({ status: 200 });
        expect(await mcpStatus(base, String(second.body.access_token))).toBe(200);
      }
    } finally {
      await broker.kill();
    }

    // Nothing half written: every rotated token names a successor that exists, with its access token.
    const database = await openDatabase(url, dir);
    try {
      const { db } = database;
      expect(await db.grant.count({ where: { revokedAt: { not: null } } })).toBe(0);
      const rotated = await db.refreshToken.findMany({ where: { consumedAt: { not: null } } });
      expect(rotated.length).toBeGreaterThanOrEqual(ANSWERED_BEFORE_KILL);
      const successors = new Set((await db.refreshToken.findMany({ select: { id: true } })).map((r) => r.id));
      const issuedBy = new Set((await db.accessToken.findMany({ select: { refreshTokenId: true } })).map((a) => a.refreshTokenId));
      for (const token of rotated) {
        expect(token.successorId).not.toBeNull();
        expect(successors.has(token.successorId!)).toBe(true);
        expect(issuedBy.has(token.successorId!)).toBe(true);
      }
      expect(await db.auditEvent.count({ where: { type: "token.refreshed" } })).toBe(rotated.length);
    } finally {
      await database.close();
    }
  }, 120_000);
});
