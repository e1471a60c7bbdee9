// When the database cannot be reached, requests that need it get 503 with Retry-After and the
// error format of their route (OAuth JSON, JSON-RPC, page), never a 500; the broker recovers by
// itself when the database is back.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Writable } from "node:stream";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { createPostgresDatabase, postgresAvailable, type TestPostgresDatabase } from "../support/pg-database.ts";
import { obtainTokens, tokenRequest } from "../support/oauth-flow.ts";
import { initializeAs } from "../support/mcp-probe.ts";

(postgresAvailable ? describe : describe.skip)("a PostgreSQL outage", () => {
  let t: TestBroker;
  let database: TestPostgresDatabase;
  beforeAll(async () => {
    database = await createPostgresDatabase();
    t = await startBroker({ DATABASE_URL: database.url, LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent" });
  }, 60_000);
  afterAll(async () => {
    await database.comeBack().catch(() => undefined);
    await t.stop().catch(() => undefined);
    await database.drop();
  });

  const mcpHeaders = (token: string, session?: string) => ({
    authorization: `Bearer ${token}`,
    "content-type": "application/json",
    accept: "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
    ...(session ? { "mcp-session-id": session } : {}),
  });

  it("answers 503 with Retry-After in each route's error format, keeps serving cached MCP sessions, and recovers", async () => {
    const { client, tokens } = await obtainTokens(t.url);
    // An MCP session opened while the database is up: its token and owner are now in memory.
    const init = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: mcpHeaders(tokens.access_token),
      body: JSON.stringify(initializeAs({ name: "t", version: "1" })),
    });
    const session = init.headers.get("mcp-session-id")!;
    await init.text();

    await database.goDown();
    try {
      const expectUnavailable = async (res: Response, body: (text: string) => void) => {
        expect(res.status).toBe(503);
        expect(res.headers.get("retry-after")).toBe("5");
        body(await res.text());
      };
      const oauthJson = (text: string) => expect(JSON.parse(text)).toMatchObject({ error: "temporarily_unavailable" });
      const refresh = await fetch(`${t.url}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id }),
      });
      await expectUnavailable(refresh, oauthJson);
      const registration = await fetch(`${t.url}/register`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ redirect_uris: ["http://127.0.0.1:9/cb"], token_endpoint_auth_method: "none" }),
      });
      await expectUnavailable(registration, oauthJson);
      // A token this instance has not seen cannot be checked: refused for now, not let through.
      const unknown = await fetch(`${t.url}/mcp`, { method: "POST", headers: mcpHeaders(`mab_at_${"x".repeat(43)}`), body: "{}" });
      const jsonRpc = (text: string) =>
        expect(JSON.parse(text)).toEqual({ jsonrpc: "2.0", error: { code: -32000, message: expect.stringMatching(/database/) }, id: null });
      await expectUnavailable(unknown, jsonRpc);
      const page = await fetch(`${t.url}/authorize?client_id=${client.client_id}&response_type=code`);
      await expectUnavailable(page, (text) => expect(text).toContain("Temporarily unavailable"));

      // The cached token and session need no database.
      const cached = await fetch(`${t.url}/mcp`, {
        method: "POST",
        headers: mcpHeaders(tokens.access_token, session),
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      });
      expect(cached.status).toBe(200);
      expect(await cached.text()).toContain("whoami");
    } finally {
      await database.comeBack();
    }
    const after = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(after.status).toBe(200);
  }, 60_000);
});

(postgresAvailable ? describe : describe.skip)("the log of an outage", () => {
  it("is one line when it starts and one when it ends, whatever the number of polls", async () => {
    const database = await createPostgresDatabase();
    let output = "";
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        output += chunk.toString();
        done();
      },
    });
    // The feed is polled by hand below: no timer races the test.
    const t = await startBroker({ DATABASE_URL: database.url, LOG_LEVEL: "info" }, { logDestination: sink, revocationPollMs: 3_600_000 });
    try {
      const feed = t.broker.services.grants.revocationFeed;
      await feed.poll();
      await database.goDown();
      for (let i = 0; i < 5; i++) await feed.poll();
      await database.comeBack();
      await feed.poll();
      await feed.poll();
      const lines = output
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as { level: number; msg: string; err?: string; seconds?: number })
        .filter((l) => /revocation feed/.test(l.msg));
      expect(lines).toEqual([
        expect.objectContaining({ level: 40, msg: expect.stringContaining("cannot read the database"), err: expect.any(String) }),
        expect.objectContaining({ level: 30, msg: "the database answers the revocation feed again", seconds: expect.any(Number) }),
      ]);
      // One line, not Prisma's message with its source excerpts.
      expect(lines[0]!.err).not.toContain("\n");
    } finally {
      await database.comeBack().catch(() => undefined);
      await t.stop().catch(() => undefined);
      await database.drop();
    }
  }, 60_000);
});
