// Liveness and readiness probes.
import Router from "@koa/router";
import type { Database } from "../store/db.ts";

export function healthRouter(database: Database): Router {
  const router = new Router();
  router.get("/healthz", (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.body = { status: "ok" };
  });
  router.get("/readyz", async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    try {
      await database.db.$queryRawUnsafe("SELECT 1");
      ctx.body = { status: "ready", database: "reachable" };
    } catch {
      ctx.status = 503;
      ctx.body = { status: "not ready", database: "unreachable" };
    }
  });
  return router;
}
