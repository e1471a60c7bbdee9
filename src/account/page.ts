// GET /account: the sign-in button, or (after a recent upstream sign-in in this browser) the
// signed-in user's connected apps. The browser session is created here, so the sign-in form
// carries a CSRF token bound to it.
import type Koa from "koa";
import { paramsToRecord } from "../http/body.ts";
import { browserSessionId, takeRevokedApp } from "../http/browser-session.ts";
import { ACCOUNT_NOTICES, renderAccountSignInPage, renderConnectedAppsPage, type AccountNotice } from "../views/account-page.ts";
import type { AccountDeps } from "./deps.ts";
import { sendHtml } from "../http/html-page.ts";

export function accountPageHandler(deps: AccountDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    const query = paramsToRecord(new URLSearchParams(ctx.querystring));
    const notice = ACCOUNT_NOTICES.find((n): n is AccountNotice => n === query.notice);
    const sid = browserSessionId(ctx, true);
    const identity = await deps.browserIdentities.forAccountPage(sid);
    const revokedApp = takeRevokedApp(ctx);
    const common = {
      resourceName: deps.resourceName,
      providerName: deps.providerName,
      csrfToken: deps.signIn.csrfToken(sid),
      notice,
      revokedApp: notice === "revoked" ? revokedApp : undefined,
    };
    ctx.set("Cache-Control", "no-store");
    if (!identity) {
      sendHtml(ctx, renderAccountSignInPage({ ...common, selectAccount: query.another === "1" }));
      return;
    }
    const [apps, connections] = await Promise.all([deps.apps.list(identity.subject), deps.connect?.connections.list(identity.subject)]);
    sendHtml(ctx, renderConnectedAppsPage({ ...common, signedInAs: identity.login ?? identity.subject, apps, connections }));
  };
}
