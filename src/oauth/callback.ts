// GET /oauth/callback: the upstream IdP's redirect back to the broker. Thin: the grants layer
// matches the transaction and browser session, exchanges the code and decides where to go.
import { callbackPath, callbackUrl } from "../config.ts";
import Router from "@koa/router";
import type { UpstreamLogin } from "../grants/upstream-login.ts";
import { browserSessionId } from "../http/browser-session.ts";
import { publicPaths } from "../http/public-paths.ts";
import { paramsToRecord } from "../http/body.ts";
import { renderAccessRefusedPage } from "../views/access-refused-page.ts";

export function callbackRouter(upstreamLogin: UpstreamLogin, publicUrl: string, resourceName: string): Router {
  const router = new Router();
  router.get(publicPaths(publicUrl, callbackPath), async (ctx) => {
    ctx.state.errorFormat = "page";
    // Refuses duplicated parameters and control characters before anything is looked up.
    paramsToRecord(new URLSearchParams(ctx.querystring));
    // The URL as the IdP saw it (PUBLIC_URL based), so issuer-side checks of the redirect URI agree.
    const url = new URL(`${callbackUrl(publicUrl)}${ctx.querystring ? `?${ctx.querystring}` : ""}`);
    const outcome = await upstreamLogin.complete({ callbackUrl: url, browserSessionId: browserSessionId(ctx, false), ip: ctx.ip });
    ctx.set("Cache-Control", "no-store");
    if (outcome.kind === "redirect") {
      ctx.redirect(outcome.location);
      return;
    }
    ctx.status = 403;
    ctx.type = "text/html; charset=utf-8";
    ctx.body = renderAccessRefusedPage({
      login: outcome.account.login,
      providerName: outcome.account.providerName,
      resourceName,
      returnTo: { url: outcome.returnTo, clientName: outcome.clientName },
    });
  });
  return router;
}
