// The real broker process survives database faults at /mcp (found by an attack trial): with
// the database gone, locked by another process, or read-only, `initialize` (claims a new MCP
// session), `DELETE` (releases one) and a plain call are answered — 503 with Retry-After where the
// database is needed, 200 from memory where it is not — and /healthz still answers 200. Before the
// fix, the proxy destroyed the MCP server's answer with no error listener and the process died.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import Database from "libsql";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { createPostgresDatabase, postgresAvailable, type TestPostgresDatabase } from "../support/pg-database.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { makeUnwritable, mechanism } from "../support/unwritable.ts";

const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};

function mcp(broker: BrokerProcess, token: string, init: { method?: string; session?: string; body?: unknown } = {}): Promise<Response> {
  return fetch(`${broker.url}/mcp`, {
    method: init.method ?? "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2025-06-18",
      ...(init.session ? { "mcp-session-id": init.session } : {}),
    },
    ...(init.method === "DELETE" ? {} : { body: JSON.stringify(init.body ?? initialize) }),
  });
}

/** A token and an open MCP session, both now in the broker's memory. */
async function openSession(broker: BrokerProcess): Promise<{ token: string; session: string }> {
  const { tokens } = await obtainTokens(broker.url);
  const res = await mcp(broker, tokens.access_token);
  expect(res.status).toBe(200);
  await res.text();
  return { token: tokens.access_token, session: res.headers.get("mcp-session-id")! };
}

/** Drives initialize, DELETE and a plain call during a fault; the process must answer and live on. */
async function underFault(broker: BrokerProcess, token: string, session: string, expectedStatus: number): Promise<void> {
  const answered = async (res: Response) => {
    expect(res.status).toBe(expectedStatus);
    if (expectedStatus !== 503) return void (await res.text());
    expect(res.headers.get("retry-after")).toBe("5");
    // The MCP endpoint's error format, as its router sets it in production.
    expect(await res.json()).toEqual({ jsonrpc: "2.0", error: { code: -32000, message: expect.stringMatching(/database/) }, id: null });
  };
  const plain = await mcp(broker, token, { session, body: { jsonrpc: "2.0", id: 2, method: "tools/list" } });
  expect(plain.status).toBe(200);
  expect(await plain.text()).toContain("whoami");
  // At once, as two clients send them: both need the database and wait for it together.
  const [claim, release] = await Promise.all([mcp(broker, token), mcp(broker, token, { method: "DELETE", session })]);
  await answered(claim);
  await answered(release);
  const health = await fetch(`${broker.url}/healthz`);
  expect(health.status).toBe(200);
  expect(broker.child.exitCode).toBeNull();
}

// The three faults are independent (own process, own database) and mostly wait (a 5 s
// busy_timeout, process starts): they run concurrently.
describe("database faults at /mcp, real broker process", () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-fault-"));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  (postgresAvailable ? it.concurrent : it.skip)(
    "PostgreSQL stopped",
    async () => {
      const database: TestPostgresDatabase = await createPostgresDatabase();
      const broker = await startBrokerProcess(dir, { DATABASE_URL: database.url });
      try {
        const { token, session } = await openSession(broker);
        await database.goDown();
        try {
          await underFault(broker, token, session, 503);
        } finally {
          await database.comeBack();
        }
        // Recovered by itself: a new session is claimed again.
        const again = await mcp(broker, token);
        expect(again.status).toBe(200);
        await again.text();
      } finally {
        await broker.kill();
        await database.drop();
      }
    },
    60_000,
  );

  /**
   * A broker process on a SQLite file: `inject` starts the fault and returns its end; during it the
   * broker must answer as `underFault` says, afterwards it works again without a restart.
   */
  async function sqliteFault(name: string, inject: (file: string) => () => void, duringFault?: (broker: BrokerProcess) => Promise<void>): Promise<void> {
    const file = path.join(dir, `${name}.db`);
    const broker = await startBrokerProcess(dir, { DATABASE_URL: `file:${file}` });
    try {
      const { token, session } = await openSession(broker);
      const end = inject(file);
      try {
        await underFault(broker, token, session, 503);
        await duringFault?.(broker);
      } finally {
        end();
      }
      const again = await mcp(broker, token);
      expect(again.status).toBe(200);
      await again.text();
    } finally {
      await broker.kill();
    }
  }

  it.concurrent("SQLite write-locked by another process", async () => {
    // Another process (the CLI, a backup) holds the write lock longer than busy_timeout (5 s). That
    // the writes queued meanwhile fail with the first instead of each waiting again is the writer's
    // rule, shown in test/store/sqlite-writer.test.ts.
    await sqliteFault("locked", (file) => {
      const other = new Database(file);
      other.exec("BEGIN IMMEDIATE");
      return () => {
        other.exec("ROLLBACK");
        other.close();
      };
    });
  }, 60_000);

  // chattr +i (root): genuinely read-only even for root. Not the -shm file: SQLite maps it, and a
  // mapping that cannot grow ends the process with SIGBUS (a known limit of SQLite on a full disk).
  (mechanism === "chattr" ? it.concurrent : it.skip)(
    "SQLite file made read-only under the running broker",
    async () => {
      await sqliteFault(
        "readonly",
        (file) => makeUnwritable([file, `${file}-wal`]),
        async (broker) => expect((await fetch(`${broker.url}/readyz`)).status).toBe(503),
      );
    },
    60_000,
  );
});
