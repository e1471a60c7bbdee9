// /metrics in the Prometheus format after a scripted session — a login, MCP calls,
// a refreshed token, a refused token, another user's MCP session, an MCP server that went away —
// each figure moved. /metrics is never public unprotected: behind METRICS_TOKEN on the main
// listener, or on its own loopback listener (METRICS_PORT).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens, tokenRequest } from "../support/oauth-flow.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { INITIALIZE_MESSAGE, mcpPost } from "../support/mcp-probe.ts";

const TOKEN = "metrics-scraper-token-0123456789";

/** The value of one series (name and exact labels) in a Prometheus text exposition; 0 when absent. */
function sample(text: string, series: string): number {
  for (const line of text.split("\n")) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return 0;
}

function mcp(t: TestBroker, token: string, session?: string): Promise<Response> {
  return mcpPost(t.url, token, session ? { jsonrpc: "2.0", id: 2, method: "tools/list" } : INITIALIZE_MESSAGE, session);
}

describe("/metrics behind METRICS_TOKEN, after a scripted session", () => {
  let t: TestBroker;
  let server: DemoMcpServer;
  beforeAll(async () => {
    server = await startDemoMcpServer();
    // Every use re-checks the upstream login: the identity provider calls show up at once.
    t = await startBroker({ METRICS_TOKEN: TOKEN, MCP_SERVER_URL: server.url, UPSTREAM_RECHECK_SECONDS: "0" });
  });
  afterAll(async () => {
    await t.stop();
    await server.close();
  });

  const scrape = async () => {
    const res = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/plain");
    return res.text();
  };

  it("is refused without the token, or with a wrong one", async () => {
    for (const headers of [{}, { authorization: "Bearer wrong" }, { authorization: `Bearer ${TOKEN}x` }] as Array<Record<string, string>>) {
      const res = await fetch(`${t.url}/metrics`, { headers });
      expect(res.status).toBe(401);
      expect(await res.text()).not.toContain("mab_");
    }
  });

  it("moves every figure of the session", async () => {
    const before = await scrape();
    const alice = await obtainTokens(t.url, { user: "alice" });
    const bob = await obtainTokens(t.url, { user: "bob" });
    const refreshed = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: alice.tokens.refresh_token, client_id: alice.client.client_id });
    expect(refreshed.status).toBe(200);
    const access = refreshed.body.access_token as string;

    const opened = await mcp(t, access);
    expect(opened.status).toBe(200);
    await opened.text();
    const session = opened.headers.get("mcp-session-id")!;
    const listed = await mcp(t, access, session);
    expect(listed.status).toBe(200);
    await listed.text();
    expect((await mcp(t, "mab_at_not-a-token")).status).toBe(401);
    // Bob presents Alice's MCP session.
    expect((await mcp(t, bob.tokens.access_token, session)).status).toBe(403);
    // Registrations past the token bucket's burst (60) from one address: 429.
    const registrations = await Promise.all(
      Array.from({ length: 70 }, () =>
        fetch(`${t.url}/register`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ redirect_uris: ["http://127.0.0.1:9/cb"], token_endpoint_auth_method: "none" }),
        }).then((r) => r.status),
      ),
    );
    const limited = registrations.filter((status) => status === 429).length;
    expect(limited).toBeGreaterThan(0);
    // The MCP server goes away: 502.
    await server.close();
    expect((await mcp(t, access)).status).toBe(502);

    const after = await scrape();
    const moved = (series: string, by = 1) => expect([series, sample(after, series) - sample(before, series)]).toEqual([series, by]);
    const grew = (series: string) => expect([series, sample(after, series) > sample(before, series)]).toEqual([series, true]);
    moved('mab_tokens_issued_total{grant_type="authorization_code"}', 2);
    moved('mab_tokens_issued_total{grant_type="refresh_token"}');
    moved('mab_http_requests_total{route="token",method="POST",status="200"}', 3);
    moved('mab_http_requests_total{route="mcp",method="POST",status="200"}', 2);
    moved('mab_http_requests_total{route="mcp",method="POST",status="401"}');
    moved('mab_http_requests_total{route="mcp",method="POST",status="403"}');
    moved('mab_http_requests_total{route="mcp",method="POST",status="502"}');
    grew('mab_http_requests_total{route="authorize",method="GET",status="302"}');
    grew('mab_http_request_duration_seconds_count{route="mcp",method="POST"}');
    moved('mab_refusals_total{reason="invalid_token"}');
    moved('mab_refusals_total{reason="session_owner"}');
    moved('mab_refusals_total{reason="rate_limited"}', limited);
    moved('mab_proxy_failures_total{reason="unreachable"}');
    grew("mab_mcp_server_response_seconds_count");
    grew('mab_upstream_call_duration_seconds_count{call="check",result="ok"}');
    expect(sample(after, "mab_live_grants")).toBeGreaterThanOrEqual(2);
    grew("mab_database_queries_total");
    // The process itself (prom-client's default metrics).
    expect(sample(after, "mab_process_cpu_seconds_total")).toBeGreaterThan(0);
    // Counts and durations only: no token, user or session id.
    for (const secret of [access, alice.tokens.refresh_token, session, "alice", "bob"]) expect(after).not.toContain(secret);
  });
});

describe("/metrics on its own loopback listener (METRICS_PORT)", () => {
  let t: TestBroker;
  beforeAll(async () => {
    t = await startBroker({ METRICS_PORT: "0" });
  });
  afterAll(async () => t.stop());

  it("answers there, and the public listener has no /metrics", async () => {
    const port = t.broker.metricsPort();
    expect(port).toEqual(expect.any(Number));
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("# TYPE mab_http_requests_total counter");
    expect((await fetch(`http://127.0.0.1:${port}/token`)).status).toBe(404);
    expect((await fetch(`${t.url}/metrics`)).status).toBe(404);
  });
});
