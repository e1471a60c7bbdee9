// Liveness and readiness probes.
import Router from "@koa/router";
import type { Database } from "../store/db.ts";

export function healthRouter(database: Database): Router {
  const router = new Router();
  router.get("/healthz", (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.body = { status: "ok" };
  });
  // Ready = the database answers and this process can write to it: a broker that can only read
  // fails every login, token and revocation, so it must leave the load balancer's rotation.
  router.get("/readyz", async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    try {
      const check = await database.checkWritable();
      if (check.ok) {
        ctx.body = { status: "ready", database: "writable" };
      } else {
        ctx.status = 503;
        ctx.body = { status: "not ready", database: "not writable", reason: check.reason };
      }
    } catch {
      ctx.status = 503;
      ctx.body = { status: "not ready", database: "unreachable" };
    }
  });
  return router;
}
