// Liveness and readiness probes.
import Router from "@koa/router";
import type { Database } from "../store/db.ts";
import { firstLine } from "../lib/error-text.ts";
import type { Logger } from "../logger.ts";

/**
 * Logs why the broker is not ready when that changes, and when it is ready again: a probe every
 * few seconds must not repeat the same line, and an operator must see the cause without reading
 * the probe's answers.
 */
function readinessLog(logger: Logger | undefined): (cause: string | undefined) => void {
  let logged: string | undefined;
  return (cause) => {
    if (cause === logged) return;
    if (cause === undefined) logger?.info({ was: logged }, "ready again: the database answers and takes writes");
    else logger?.warn({ cause }, "not ready: /readyz answers 503");
    logged = cause;
  };
}

export function healthRouter(database: Database, logger?: Logger): Router {
  const router = new Router();
  const report = readinessLog(logger);
  router.get("/healthz", (ctx) => {
    ctx.set("Cache-Control", "no-store");
    ctx.body = { status: "ok" };
  });
  // Ready = the database answers and this process can write to it, as its writes see it: a
  // broker that can only read fails every login, token and revocation, so it must leave the load
  // balancer's rotation.
  router.get("/readyz", async (ctx) => {
    ctx.set("Cache-Control", "no-store");
    try {
      const check = await database.checkWritable();
      if (check.ok) {
        report(undefined);
        ctx.body = { status: "ready", database: "writable" };
      } else {
        report(check.reason);
        ctx.status = 503;
        ctx.body = { status: "not ready", database: "not writable", reason: check.reason };
      }
    } catch (err) {
      report(`the database is unreachable: ${firstLine(err)}`);
      ctx.status = 503;
      ctx.body = { status: "not ready", database: "unreachable" };
    }
  });
  return router;
}
