// GET /oauth/callback: the upstream IdP's redirect back to the broker, the one URL registered there
// for every sign-in. Thin: it dispatches by `state` (the connected-apps page's sign-ins are
// recognized by theirs; any other is a client's authorization) and the grants layer matches the
// transaction and browser session, exchanges the code and decides where to go.
import { callbackPath, callbackUrl } from "../config/load.ts";
import Router from "@koa/router";
import type { UpstreamLogin } from "../grants/upstream-login.ts";
import { browserSessionId, useBrowserSessionId } from "../http/browser-session.ts";
import { clearTransactionCookie, setTransactionCookie, transactionBinding } from "../http/transaction-cookie.ts";
import { publicPaths } from "../http/public-paths.ts";
import { paramsToRecord } from "../http/body.ts";
import { sendHtml } from "../http/html-page.ts";
import { renderAccessRefusedPage } from "../views/access-refused-page.ts";
import type { CallbackBranch } from "../http/callback-branch.ts";

export function callbackRouter(upstreamLogin: UpstreamLogin, publicUrl: string, accountSignIn?: CallbackBranch): Router {
  const router = new Router();
  router.get(publicPaths(publicUrl, callbackPath), async (ctx) => {
    ctx.state.errorFormat = "page";
    // Refuses duplicated parameters and control characters before anything is looked up.
    paramsToRecord(new URLSearchParams(ctx.querystring));
    // The URL as the IdP saw it (PUBLIC_URL based), so issuer-side checks of the redirect URI agree.
    const url = new URL(`${callbackUrl(publicUrl)}${ctx.querystring ? `?${ctx.querystring}` : ""}`);
    const state = url.searchParams.get("state");
    if (accountSignIn && state && (await accountSignIn.owns(state))) {
      await accountSignIn.complete(ctx, url);
      return;
    }
    const outcome = await upstreamLogin.complete({
      callbackUrl: url,
      browserSessionId: browserSessionId(ctx, false),
      bindingOf: (transactionId) => transactionBinding(ctx, transactionId),
      ip: ctx.ip,
    });
    // A sign-in waiting for connected accounts goes on at the consent page, in this browser (its
    // binding cookie lives as long as the wait).
    const binding = transactionBinding(ctx, outcome.transactionId);
    if (outcome.kind === "connect" && binding) setTransactionCookie(ctx, outcome.transactionId, binding, outcome.waitsUntil);
    else clearTransactionCookie(ctx, outcome.transactionId);
    // A sign-in moves the browser to a new session id: a copy of the old one gains nothing.
    if (outcome.browserSessionId) useBrowserSessionId(ctx, outcome.browserSessionId);
    ctx.set("Cache-Control", "no-store");
    if (outcome.kind === "redirect" || outcome.kind === "connect") {
      ctx.redirect(outcome.location);
      return;
    }
    const returnTo = { url: outcome.returnTo, clientName: outcome.clientName };
    ctx.state.refusal = "policy_denied";
    sendHtml(ctx, renderAccessRefusedPage({ account: outcome.account, resourceName: outcome.serverTitle, returnTo }), 403);
  });
  return router;
}
