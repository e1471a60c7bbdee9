// GET /oauth/callback: the upstream IdP's redirect back to the broker. Thin: the grants layer
// matches the transaction and browser session, exchanges the code and decides where to go.
import Router from "@koa/router";
import type { UpstreamLogin } from "../grants/upstream-login.ts";
import { browserSessionId } from "../http/browser-session.ts";
import type { RequestState } from "../http/request-context.ts";
import { publicPaths } from "../http/public-paths.ts";
import { paramsToRecord } from "../http/body.ts";

export function callbackRouter(upstreamLogin: UpstreamLogin, publicUrl: string): Router {
  const router = new Router();
  router.get(publicPaths(publicUrl, "/oauth/callback"), async (ctx) => {
    (ctx.state as RequestState).errorFormat = "page";
    // Refuses duplicated parameters and control characters before anything is looked up.
    paramsToRecord(new URLSearchParams(ctx.querystring));
    // The URL as the IdP saw it (PUBLIC_URL based), so issuer-side checks of the redirect URI agree.
    const callbackUrl = new URL(`${publicUrl}/oauth/callback${ctx.querystring ? `?${ctx.querystring}` : ""}`);
    const location = await upstreamLogin.complete({ callbackUrl, browserSessionId: browserSessionId(ctx, false), ip: ctx.ip });
    ctx.set("Cache-Control", "no-store");
    ctx.redirect(location);
  });
  return router;
}
