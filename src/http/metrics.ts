// Prometheus metrics (prom-client): requests by route, method and status with latency; the MCP
// server behind the proxy (latency to its answer, failures); tokens issued by grant type; refusals
// by reason; upstream identity provider calls by result with latency; live grants; the process.
// No identities, no tokens: only counts and durations. Served on its own loopback listener
// (METRICS_PORT) or behind a bearer token (METRICS_TOKEN), never to the public unprotected.
import { timingSafeEqual } from "node:crypto";
import Router from "@koa/router";
import type Koa from "koa";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

/** What the metrics read from the rest of the broker at scrape time. */
export interface MetricsSources {
  readonly databaseQueries: () => number;
  readonly validationCache: () => { readonly hits: number; readonly misses: number };
  readonly liveGrants: () => Promise<number>;
}

/** Fixed route labels: a path never becomes a label of its own (no unbounded series). */
const ROUTES: ReadonlyArray<readonly [string, string]> = [
  ["/mcp", "mcp"],
  ["/token", "token"],
  ["/authorize", "authorize"],
  ["/register", "register"],
  ["/revoke", "revoke"],
  ["/introspect", "introspect"],
  ["/consent", "consent"],
  ["/oauth/callback", "callback"],
  ["/account", "account"],
  ["/.well-known/", "metadata"],
  ["/demo-idp", "demo_idp"],
  ["/healthz", "health"],
  ["/readyz", "health"],
  ["/metrics", "metrics"],
];

export function routeOf(path: string, mcpMounts: readonly string[]): string {
  if (mcpMounts.some((m) => path === m || path.startsWith(`${m}/`))) return "mcp";
  for (const [prefix, route] of ROUTES) if (path === prefix || path.startsWith(prefix.endsWith("/") ? prefix : `${prefix}/`)) return route;
  return path === "/" || path === "/favicon.ico" ? "front" : "other";
}

const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export class BrokerMetrics {
  readonly registry = new Registry();
  private readonly mcpRequests = new Counter({
    name: "mab_mcp_requests_total",
    help: "Requests to the MCP servers, by catalogue server and status.",
    labelNames: ["server", "status"] as const,
    registers: [this.registry],
  });
  private readonly requests = new Counter({
    name: "mab_http_requests_total",
    help: "HTTP requests answered, by route, method and status.",
    labelNames: ["route", "method", "status"] as const,
    registers: [this.registry],
  });
  private readonly latency = new Histogram({
    name: "mab_http_request_duration_seconds",
    help: "Time to answer an HTTP request (to the end of the response), by route and method.",
    labelNames: ["route", "method"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly mcpServerLatency = new Histogram({
    name: "mab_mcp_server_response_seconds",
    help: "Time the MCP server behind the broker took to start answering.",
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  private readonly proxyFailures = new Counter({
    name: "mab_proxy_failures_total",
    help: "Requests to the MCP server that failed: unreachable (502), timeout (504), client_gone (the client left first).",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  private readonly tokens = new Counter({
    name: "mab_tokens_issued_total",
    help: "Successful token responses, by grant type.",
    labelNames: ["grant_type"] as const,
    registers: [this.registry],
  });
  private readonly refusals = new Counter({
    name: "mab_refusals_total",
    help: "Requests refused: invalid_token, insufficient_scope, session_owner (another user's MCP session), policy_denied, tool_denied (a tool call the server's tool rules refuse), rate_limited.",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  private readonly upstreamCalls = new Histogram({
    name: "mab_upstream_call_duration_seconds",
    help: "Calls to the upstream identity provider for a session's check, identity or refresh, by call and result (ok, rejected, unavailable).",
    labelNames: ["call", "result"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  constructor(
    sources: MetricsSources,
    private readonly mcpMounts: readonly string[],
  ) {
    collectDefaultMetrics({ register: this.registry, prefix: "mab_" });
    // Every reason has a series from the start: increase() and rate() see the first refusal, and
    // an alert on one reason does not wait for a series that is not there yet.
    for (const reason of REFUSAL_REASONS) this.refusals.inc({ reason }, 0);
    new Counter({
      name: "mab_database_queries_total",
      help: "Database queries sent by this process.",
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(sources.databaseQueries());
      },
    });
    new Counter({
      name: "mab_token_validation_cache_total",
      help: "Access token validations, answered from memory (hit) or from the database (miss).",
      labelNames: ["result"] as const,
      registers: [this.registry],
      collect() {
        const { hits, misses } = sources.validationCache();
        this.reset();
        this.inc({ result: "hit" }, hits);
        this.inc({ result: "miss" }, misses);
      },
    });
    new Gauge({
      name: "mab_live_grants",
      help: "Grants alive now (not revoked, not timed out).",
      registers: [this.registry],
      async collect() {
        this.set(await sources.liveGrants());
      },
    });
  }

  /** Counts and times every request; reads what the routes noted in ctx.state. */
  middleware(): Koa.Middleware {
    return async (ctx, next) => {
      const started = performance.now();
      try {
        await next();
      } finally {
        const route = routeOf(ctx.path, this.mcpMounts);
        const observe = () => {
          const status = String(ctx.respond === false ? ctx.res.statusCode : ctx.status);
          this.requests.inc({ route, method: ctx.method, status: String(ctx.status) });
          if (ctx.state.server !== undefined) this.mcpRequests.inc({ server: ctx.state.server, status });
          this.latency.observe({ route, method: ctx.method }, (performance.now() - started) / 1000);
        };
        // Streamed answers (the proxy's) end after the middleware returns. `on`: "close" comes once,
        // and a `once` wrapper would be kept for as long as an event stream is open.
        if (ctx.respond === false && !ctx.res.writableFinished) ctx.res.on("close", observe);
        else observe();
        const refusal = ctx.state.refusal ?? refusalOf(ctx, route);
        if (refusal) this.refusals.inc({ reason: refusal });
        if (route === "token" && ctx.status === 200 && ctx.state.grantType) this.tokens.inc({ grant_type: ctx.state.grantType });
      }
    };
  }

  mcpServerAnswered(seconds: number): void {
    this.mcpServerLatency.observe(seconds);
  }

  proxyFailed(reason: "unreachable" | "timeout" | "client_gone"): void {
    this.proxyFailures.inc({ reason });
  }

  policyDenied(): void {
    this.refusals.inc({ reason: "policy_denied" });
  }

  upstreamCall(call: string, result: string, seconds: number): void {
    this.upstreamCalls.observe({ call, result }, seconds);
  }
}

/** mab_refusals_total's reasons (README, "Metrics"). */
const REFUSAL_REASONS = ["invalid_token", "insufficient_scope", "session_owner", "policy_denied", "tool_denied", "rate_limited"] as const;

/** A refusal the response itself shows: the bearer challenge's error, or a rate limit. */
function refusalOf(ctx: Koa.Context, route: string): string | undefined {
  if (ctx.status === 429) return "rate_limited";
  if (route !== "mcp" || (ctx.status !== 401 && ctx.status !== 403)) return undefined;
  return /error="(invalid_token|insufficient_scope)"/.exec(ctx.response.get("WWW-Authenticate"))?.[1];
}

/**
 * GET /metrics. `token`: the bearer token a scraper must send (compared in constant time);
 * undefined on the separate loopback listener, where reaching the port is the permission.
 */
export function metricsRouter(metrics: BrokerMetrics, token: string | undefined): Router {
  const router = new Router();
  const expected = token === undefined ? undefined : Buffer.from(`Bearer ${token}`);
  router.get("/metrics", async (ctx) => {
    if (expected) {
      const given = Buffer.from(ctx.get("authorization"));
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        ctx.status = 401;
        ctx.set("WWW-Authenticate", 'Bearer realm="metrics"');
        ctx.body = "metrics need the bearer token set in METRICS_TOKEN\n";
        return;
      }
    }
    ctx.set("Cache-Control", "no-store");
    ctx.type = metrics.registry.contentType;
    ctx.body = await metrics.registry.metrics();
  });
  return router;
}
