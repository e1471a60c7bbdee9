// GET /oauth/connect/callback: where every connected-account service sends the browser back (the
// one redirect URI registered there). The grants layer claims the connect step it belongs to (in
// the browser that started it) and links the account; the browser returns to where the step was
// started: the consent page of its authorization, or /account.
import Router from "@koa/router";
import { connectCallbackPath } from "../config/load.ts";
import type { ConnectFlow } from "../grants/connect-flow.ts";
import { paramsToRecord } from "../http/body.ts";
import { browserSessionId } from "../http/browser-session.ts";
import { publicPaths } from "../http/public-paths.ts";
import { accountUrl } from "../account/deps.ts";

export function connectCallbackRouter(flow: ConnectFlow, publicUrl: string): Router {
  const router = new Router();
  router.get(publicPaths(publicUrl, connectCallbackPath), async (ctx) => {
    ctx.state.errorFormat = "page";
    // Refuses duplicated parameters and control characters before anything is looked up.
    paramsToRecord(new URLSearchParams(ctx.querystring));
    const url = new URL(`${publicUrl}${connectCallbackPath}${ctx.querystring ? `?${ctx.querystring}` : ""}`);
    const outcome = await flow.complete(url, browserSessionId(ctx, false) ?? undefined, ctx.ip);
    ctx.set("Cache-Control", "no-store");
    if (outcome.transactionId !== null) {
      const failed = outcome.failure ? "&failed=1" : "";
      ctx.redirect(`${publicUrl}/consent?transaction=${encodeURIComponent(outcome.transactionId)}${failed}`);
      return;
    }
    ctx.redirect(accountUrl(publicUrl, { notice: outcome.failure ? "connect_failed" : "connected" }));
  });
  return router;
}
