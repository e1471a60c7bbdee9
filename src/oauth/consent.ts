// GET/POST /consent: the user's decision, before anything goes upstream (spec §5.5.8). Only the
// browser that started the transaction (its transaction cookie) may decide, once, with the form's
// CSRF token. The consent is remembered for this browser's session. "Not you?"
// is an Allow that first forgets who this browser was (and the consents it remembered), then asks
// the upstream IdP for another account.
import type Koa from "koa";
import { serverByResource, type Catalogue } from "../config/catalogue.ts";
import { PageError } from "../grants/errors.ts";
import { PAGE_FORM_LIMIT, paramsToRecord, readForm } from "../http/body.ts";
import { browserSessionId } from "../http/browser-session.ts";
import { clearTransactionCookie, transactionBinding } from "../http/transaction-cookie.ts";
import { clientRedirectUrl } from "../grants/client-redirect.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { AuthorizationTransactions } from "../grants/transactions.ts";
import type { Consents } from "../grants/consents.ts";
import type { BrowserIdentities } from "../grants/browser-identities.ts";
import type { UpstreamLoginStarter } from "../grants/ports.ts";
import { renderConsentPage } from "../views/consent-page.ts";
import { sendHtml } from "../http/html-page.ts";
import { decideConnectStep, showConnectStep, type ConnectStepDeps } from "./connect-step.ts";

export interface ConsentDeps {
  readonly issuer: string;
  readonly clients: ClientRegistry;
  readonly transactions: AuthorizationTransactions;
  readonly consents: Consents;
  readonly upstreamLogin: UpstreamLoginStarter;
  readonly browserIdentities: BrowserIdentities;
  /** The upstream provider kind (UPSTREAM_PROVIDER): an identity from another one is not named. */
  readonly providerKind: string;
  /** The servers: the page names the one asked for and says what its scopes mean. */
  readonly catalogue: Catalogue;
  readonly idleTimeoutSeconds: number;
  readonly maxAgeSeconds: number;
  /** Connected accounts (a configuration with `connections`): the connect step after the sign-in. */
  readonly connectStep?: ConnectStepDeps | undefined;
}

/** The form's decision values ("Not you?" posts allow_other_account). */
const DECISIONS = new Map<string, "approved" | "denied">([
  ["allow", "approved"],
  ["deny", "denied"],
  ["allow_other_account", "approved"],
]);

const NOT_PENDING = new PageError(
  "invalid_request",
  "This request is no longer waiting for you",
  "It was already answered, it expired, or it was started in another browser.",
  "Go back to your application and connect again.",
);

export function consentPageHandler(deps: ConsentDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    const id = paramsToRecord(new URLSearchParams(ctx.querystring)).transaction ?? "";
    const tx = await deps.transactions.pendingFor(id, transactionBinding(ctx, id));
    if (!tx) {
      const connecting = deps.connectStep && (await deps.transactions.connectingFor(id, transactionBinding(ctx, id)));
      if (connecting && deps.connectStep) return showConnectStep(ctx, deps, deps.connectStep, connecting);
      throw NOT_PENDING;
    }
    const sid = browserSessionId(ctx, false);
    const [client, identity] = await Promise.all([deps.clients.get(tx.clientId), deps.browserIdentities.of(sid)]);
    if (!client) throw NOT_PENDING;
    const known = identity && identity.provider === deps.providerKind ? identity : null;
    // A transaction names a server of the catalogue it was made with; after a reload that removed it, nothing to consent to.
    const server = serverByResource(deps.catalogue, tx.resource);
    if (!server) throw NOT_PENDING;
    ctx.set("Cache-Control", "no-store");
    sendHtml(
      ctx,
      renderConsentPage({
        client,
        redirectUri: tx.redirectUri,
        scope: tx.scope,
        resource: tx.resource,
        providerName: deps.upstreamLogin.providerName,
        resourceName: server.title,
        signedInAs: known ? (known.login ?? known.subject) : undefined,
        idleTimeoutSeconds: deps.idleTimeoutSeconds,
        maxAgeSeconds: deps.maxAgeSeconds,
        transactionId: tx.id,
        csrfToken: deps.transactions.csrfToken(tx.id),
        scopeDescriptions: server.scopes.descriptions,
      }),
    );
  };
}

export function consentDecisionHandler(deps: ConsentDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    const form = await readForm(ctx, PAGE_FORM_LIMIT);
    const binding = form.transaction ? transactionBinding(ctx, form.transaction) : null;
    const connecting = deps.connectStep && form.transaction && form.csrf && (await deps.transactions.connectingFor(form.transaction, binding, form.csrf));
    if (connecting && deps.connectStep) return decideConnectStep(ctx, deps, deps.connectStep, connecting, form.decision ?? "");
    const decision = DECISIONS.get(form.decision ?? "");
    if (!form.transaction || !form.csrf || !decision || !(await deps.transactions.decide(form.transaction, binding, form.csrf, decision, ctx.ip))) {
      ctx.state.log.warn(
        { ip: ctx.ip, transactionCookie: Boolean(binding), csrf: Boolean(form.csrf) },
        "security: a consent answer was refused: not this browser's pending request, or a wrong CSRF token (a forged or replayed form, or a second tab)",
      );
      throw NOT_PENDING;
    }
    const tx = await deps.transactions.get(form.transaction);
    if (!tx) throw NOT_PENDING;
    ctx.set("Cache-Control", "no-store");
    // 303: the browser follows with a GET, whatever the form's method was.
    ctx.status = 303;
    if (decision === "denied") {
      clearTransactionCookie(ctx, tx.id);
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
    // Only after the CSRF check above: a forged form must not sign anyone out.
    const otherAccount = form.decision === "allow_other_account";
    const sid = browserSessionId(ctx, true);
    if (otherAccount) await deps.browserIdentities.forget(sid);
    // The consent of the person deciding now (with "Not you?", the next one at this browser).
    await deps.consents.remember({ browserSessionId: sid, clientId: tx.clientId, redirectUri: tx.redirectUri, scope: tx.scope, resource: tx.resource });
    ctx.redirect(await deps.upstreamLogin.start(tx.id, otherAccount ? { selectAccount: true } : {}));
  };
}
