// GET/POST /consent: the user's decision, before anything goes upstream (spec §5.5.8). Only the
// browser that started the transaction may decide, once, with the form's CSRF token.
import type Koa from "koa";
import { PageError } from "../http/errors.ts";
import { paramsToRecord, readForm } from "../http/body.ts";
import { browserSessionId } from "../http/browser-session.ts";
import { clientRedirectUrl } from "../grants/client-redirect.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { AuthorizationTransactions } from "../grants/transactions.ts";
import type { Consents } from "../grants/consents.ts";
import type { UpstreamLoginStarter } from "../grants/ports.ts";
import { renderConsentPage } from "../views/consent-page.ts";

export interface ConsentDeps {
  readonly issuer: string;
  readonly clients: ClientRegistry;
  readonly transactions: AuthorizationTransactions;
  readonly consents: Consents;
  readonly upstreamLogin: UpstreamLoginStarter;
}

const NOT_PENDING = new PageError(
  400,
  "This request is no longer waiting for you",
  "It was already answered, it expired, or it was started in another browser.",
  "Go back to your application and connect again.",
);

export function consentPageHandler(deps: ConsentDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    const id = paramsToRecord(new URLSearchParams(ctx.querystring)).transaction ?? "";
    const sid = browserSessionId(ctx, false);
    const tx = await deps.transactions.pendingFor(id, sid);
    if (!tx || !sid) throw NOT_PENDING;
    const client = await deps.clients.get(tx.clientId);
    if (!client) throw NOT_PENDING;
    ctx.set("Cache-Control", "no-store");
    ctx.type = "text/html; charset=utf-8";
    ctx.body = renderConsentPage({
      client,
      redirectUri: tx.redirectUri,
      scope: tx.scope,
      resource: tx.resource,
      providerName: deps.upstreamLogin.providerName,
      transactionId: tx.id,
      csrfToken: deps.transactions.csrfToken(tx.id, sid),
    });
  };
}

export function consentDecisionHandler(deps: ConsentDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    const form = await readForm(ctx, 8 * 1024);
    const sid = browserSessionId(ctx, false);
    const decision = form.decision === "allow" ? "approved" : form.decision === "deny" ? "denied" : null;
    if (!sid || !form.transaction || !form.csrf || !decision) throw NOT_PENDING;
    if (!(await deps.transactions.decide(form.transaction, sid, form.csrf, decision, ctx.ip))) throw NOT_PENDING;
    const tx = await deps.transactions.get(form.transaction);
    if (!tx) throw NOT_PENDING;
    ctx.set("Cache-Control", "no-store");
    // 303: the browser follows with a GET, whatever the form's method was.
    ctx.status = 303;
    if (decision === "denied") {
      ctx.redirect(
        clientRedirectUrl(tx.redirectUri, {
          error: "access_denied",
          error_description: "The user denied the request.",
          ...(tx.state ? { state: tx.state } : {}),
          iss: deps.issuer,
        }),
      );
      return;
    }
    await deps.consents.remember({ browserSessionId: sid, clientId: tx.clientId, redirectUri: tx.redirectUri, scope: tx.scope });
    ctx.redirect(await deps.upstreamLogin.start(tx.id));
  };
}
