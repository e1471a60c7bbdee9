// A PostgreSQL server that stops while clients refresh their tokens: every answer is either a
// token (200) or "try again" (503 with Retry-After). A 400 would make MCP SDK clients throw their
// tokens away (they read 400 invalid_request as "this refresh can never work"), a 500 would be a
// bug. The server here is this test's own, not the suite's shared one: it is stopped for good.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import pg from "pg";
import { startPostgres, type PostgresServer } from "../support/global-setup.ts";
import { migratedPostgresTemplate } from "../support/template-db.ts";
import { postgresAvailable } from "../support/pg-database.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";

/** Clients refreshing at once; at 40, a stop answered 400 to about one in ten of those in flight. */
const CHAINS = 40;
/** Refreshes answered 200 before the server is stopped: the load is really running. */
const BEFORE_STOP = 60;
/** Answers each chain gets after the server stopped. */
const AFTER_STOP = 8;

interface Answer {
  readonly status: number;
  readonly retryAfter: string | null;
  readonly body: string;
  readonly afterStop: boolean;
}

(postgresAvailable ? describe : describe.skip)("PostgreSQL stopped under refresh load", () => {
  let server: PostgresServer;
  let t: TestBroker;

  beforeAll(async () => {
    server = (await startPostgres())!;
    const template = await migratedPostgresTemplate(server.baseUrl);
    const admin = new pg.Client({ connectionString: `${server.baseUrl}/postgres` });
    await admin.connect();
    await admin.query(`CREATE DATABASE broker TEMPLATE ${template}`);
    await admin.end();
    // The setup signs 40 users in at once through the demo IdP; on a busy machine its default
    // 5 s deadline is not what this test is about.
    t = await startBroker({ DATABASE_URL: `${server.baseUrl}/broker`, UPSTREAM_TIMEOUT_SECONDS: "60" }, { migrate: false });
  }, 120_000);
  afterAll(async () => {
    await t?.stop().catch(() => undefined);
    try {
      server?.stop();
    } catch {
      // Already stopped by the test: only its folder is left, and stop() removed it.
    }
  });

  it("answers every refresh 200 or 503 with Retry-After, never 400 or 500", async () => {
    const chains = await Promise.all(Array.from({ length: CHAINS }, (_, i) => obtainTokens(t.url, { user: `user${i}` })));
    const answers: Answer[] = [];
    let stopped = false;
    let okBeforeStop = 0;
    let reachedLoad: () => void = () => undefined;
    const loaded = new Promise<void>((resolve) => {
      reachedLoad = resolve;
    });

    const run = async ({ client, tokens }: (typeof chains)[number]) => {
      let refreshToken = tokens.refresh_token;
      let afterStop = 0;
      while (afterStop < AFTER_STOP) {
        const during = stopped;
        const res = await fetch(`${t.url}/token`, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: refreshToken, client_id: client.client_id }),
        });
        const body = await res.text();
        answers.push({ status: res.status, retryAfter: res.headers.get("retry-after"), body, afterStop: during });
        if (res.status === 200) {
          refreshToken = (JSON.parse(body) as { refresh_token: string }).refresh_token;
          if (!during && ++okBeforeStop >= BEFORE_STOP) reachedLoad();
        }
        if (during) afterStop++;
      }
    };
    const load = Promise.all(chains.map(run));
    await loaded;
    // As `systemctl stop` does: every backend is told to end, mid-query; new connections are refused.
    await server.halt("fast");
    stopped = true;
    await load;

    const wrong = answers.filter((a) => !(a.status === 200 || (a.status === 503 && a.retryAfter !== null)));
    expect(wrong).toEqual([]);
    // The stop was seen: refreshes after it were refused for now, not answered from nowhere.
    expect(answers.filter((a) => a.afterStop && a.status === 503).length).toBeGreaterThan(0);
  }, 120_000);
});
