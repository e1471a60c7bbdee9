// GET /metrics: operational counters in the Prometheus text format. No identities, no tokens:
// only totals, so it is safe to expose to the operator's monitoring.
import Router from "@koa/router";

export interface MetricSource {
  readonly name: string;
  readonly help: string;
  readonly type: "counter" | "gauge";
  readonly value: () => number;
}

export function metricsRouter(sources: readonly MetricSource[]): Router {
  const router = new Router();
  router.get("/metrics", (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.type = "text/plain; version=0.0.4; charset=utf-8";
    ctx.body = sources.map((s) => `# HELP ${s.name} ${s.help}\n# TYPE ${s.name} ${s.type}\n${s.name} ${s.value()}\n`).join("");
  });
  return router;
}
