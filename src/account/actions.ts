// POST /account: sign in, revoke one app, revoke all, sign out. Every form carries the CSRF token
// of this browser session (checked before anything else); revoking needs a recent sign-in and
// touches only the signed-in user's grants. Answers 303 back to the page (or to the IdP).
import type Koa from "koa";
import { z } from "zod";
import { PageError } from "../grants/errors.ts";
import { PAGE_FORM_LIMIT, readForm } from "../http/body.ts";
import { browserSessionId, rememberRevokedApp, useBrowserSessionId } from "../http/browser-session.ts";
import { setTransactionCookie } from "../http/transaction-cookie.ts";
import { accountUrl, type AccountDeps } from "./deps.ts";

// A missing token is refused like a wrong one (403), not as a malformed form.
const csrf = z.string().max(200).default("");
const AccountForm = z.discriminatedUnion("action", [
  z.object({ action: z.literal("sign_in"), csrf, select_account: z.literal("1").optional() }),
  z.object({ action: z.literal("revoke"), csrf, grant: z.string().min(1).max(100) }),
  z.object({ action: z.literal("revoke_all"), csrf }),
  z.object({ action: z.literal("sign_out"), csrf }),
]);

const AGAIN = "Open the connected apps page again.";
const BAD_FORM = new PageError(
  "invalid_request",
  "This request cannot be completed",
  "The form was incomplete or not one of this page's. Nothing was changed.",
  AGAIN,
);
const STALE_FORM = new PageError(
  "access_denied",
  "This form has expired",
  "It was not made for this browser session (it was opened before you signed out, or in another browser). Nothing was changed.",
  AGAIN,
);
const SIGNED_OUT = new PageError("access_denied", "Sign in again", "Your sign-in to the connected apps page has ended. Nothing was changed.", AGAIN);
const NO_SUCH_APP = new PageError(
  "invalid_request",
  "No such connected app",
  "This application is not connected with your account (it may have been disconnected already). Nothing was changed.",
  "Open the connected apps page again to see the current list.",
  { status: 404 },
);

export function accountActionHandler(deps: AccountDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    const parsed = AccountForm.safeParse(await readForm(ctx, PAGE_FORM_LIMIT));
    if (!parsed.success) throw BAD_FORM;
    const form = parsed.data;
    const sid = browserSessionId(ctx, false);
    if (!sid || !deps.signIn.csrfValid(sid, form.csrf)) {
      ctx.state.log.warn(
        { ip: ctx.ip, browserSession: Boolean(sid) },
        "security: an /account form was refused: wrong CSRF token or no session (a forged or stale form)",
      );
      throw STALE_FORM;
    }
    ctx.set("Cache-Control", "no-store");
    ctx.status = 303;

    if (form.action === "sign_in") {
      const login = await deps.signIn.start(sid, { selectAccount: form.select_account === "1" });
      setTransactionCookie(ctx, login.loginId, deps.signIn.binding(login.loginId), login.expiresAt);
      ctx.redirect(login.url);
      return;
    }
    if (form.action === "sign_out") {
      await deps.signIn.signOut(sid, ctx.ip);
      useBrowserSessionId(ctx);
      ctx.redirect(accountUrl(deps.publicUrl, { notice: "signed_out" }));
      return;
    }
    const identity = await deps.browserIdentities.forAccountPage(sid);
    if (!identity) throw SIGNED_OUT;
    if (form.action === "revoke") {
      const app = (await deps.apps.list(identity.subject)).find((a) => a.grantId === form.grant);
      if (!(await deps.apps.revoke(identity.subject, form.grant, { ip: ctx.ip }))) throw NO_SUCH_APP;
      rememberRevokedApp(ctx, app?.clientName ?? app?.clientId);
      ctx.redirect(accountUrl(deps.publicUrl, { notice: "revoked" }));
      return;
    }
    await deps.apps.revokeAll(identity.subject, { ip: ctx.ip });
    ctx.redirect(accountUrl(deps.publicUrl, { notice: "revoked_all" }));
  };
}
