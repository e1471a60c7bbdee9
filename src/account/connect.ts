// /account/connect/<name>: connect (or reconnect) an account at a service of `connections`, or
// disconnect it. GET is where a server's "connect your account" link (URL elicitation) leads: it
// shows the account page, whose Connect button posts here. POST carries the page's CSRF token and
// needs a recent sign-in: only the signed-in user's own connection changes.
import type Koa from "koa";
import { z } from "zod";
import { PageError } from "../grants/errors.ts";
import { PAGE_FORM_LIMIT, readForm } from "../http/body.ts";
import { browserSessionId } from "../http/browser-session.ts";
import { accountUrl, type AccountConnectDeps, type AccountDeps } from "./deps.ts";

const ConnectForm = z.object({ action: z.enum(["connect", "disconnect"]).default("connect"), csrf: z.string().max(200).default("") });

const UNKNOWN = new PageError(
  "invalid_request",
  "Unknown service",
  "No connected-account service of that name is configured here.",
  "Open the connected apps page to see the services you can connect.",
  {
    status: 404,
  },
);
const SIGN_IN_FIRST = new PageError(
  "access_denied",
  "Sign in first",
  "Your sign-in to the connected apps page has ended. Nothing was changed.",
  "Open the connected apps page and sign in.",
);

/** GET: the account page, where the service's Connect button is (signed out: its sign-in). */
export function accountConnectPageHandler(deps: AccountDeps, connect: AccountConnectDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    if (!connect.connections.config(String(ctx.params.name ?? ""))) throw UNKNOWN;
    ctx.set("Cache-Control", "no-store");
    ctx.redirect(`${accountUrl(deps.publicUrl)}#connection-${encodeURIComponent(String(ctx.params.name))}`);
  };
}

export function accountConnectActionHandler(deps: AccountDeps, connect: AccountConnectDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    const name = String(ctx.params.name ?? "");
    const form = ConnectForm.safeParse(await readForm(ctx, PAGE_FORM_LIMIT));
    const sid = browserSessionId(ctx, false);
    if (!form.success || !sid || !deps.signIn.csrfValid(sid, form.data.csrf)) {
      ctx.state.log.warn({ ip: ctx.ip }, "security: an /account/connect form was refused: wrong CSRF token or no session (a forged or stale form)");
      throw new PageError(
        "access_denied",
        "This form has expired",
        "It was not made for this browser session. Nothing was changed.",
        "Open the connected apps page again.",
      );
    }
    if (!connect.connections.config(name)) throw UNKNOWN;
    const identity = await deps.browserIdentities.forAccountPage(sid);
    if (!identity) throw SIGN_IN_FIRST;
    ctx.set("Cache-Control", "no-store");
    ctx.status = 303;
    if (form.data.action === "disconnect") {
      await connect.connections.disconnect(identity.subject, name, ctx.ip);
      ctx.redirect(accountUrl(deps.publicUrl, { notice: "disconnected" }));
      return;
    }
    ctx.redirect(await connect.flow.start({ subject: identity.subject, name, browserSessionId: sid }));
  };
}
