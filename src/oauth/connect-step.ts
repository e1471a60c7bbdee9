// The connect step of an authorization, at /consent: after the sign-in, a server that needs
// connected accounts the user lacks waits (transaction `connecting`) while the page offers to
// connect each; Continue makes the grant and its code. Only the browser that started the
// authorization (its transaction cookie) may act, with the form's CSRF token.
import type Koa from "koa";
import { serverByResource, type Catalogue } from "../config/catalogue.ts";
import { browserSessionId } from "../http/browser-session.ts";
import { clearTransactionCookie } from "../http/transaction-cookie.ts";
import { sendHtml } from "../http/html-page.ts";
import { clientRedirectUrl } from "../grants/client-redirect.ts";
import type { AuthorizationTransactions, Transaction } from "../grants/transactions.ts";
import { PageError } from "../grants/errors.ts";
import type { ConnectFlow } from "../grants/connect-flow.ts";
import type { Connections } from "../grants/connections.ts";
import type { UpstreamLogin } from "../grants/upstream-login.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import { renderConnectStepPage } from "../views/connect-step-page.ts";

export interface ConnectStepDeps {
  readonly flow: ConnectFlow;
  readonly connections: Connections;
  readonly upstreamLogin: Pick<UpstreamLogin, "finishConnecting">;
}

/** What the step reads of the consent page's services (ConsentDeps carries them). */
export interface ConnectStepPageDeps {
  readonly issuer: string;
  readonly clients: ClientRegistry;
  readonly transactions: AuthorizationTransactions;
  readonly catalogue: Catalogue;
}

/** The page of a transaction waiting for connected accounts. */
export async function showConnectStep(ctx: Koa.Context, deps: ConnectStepPageDeps, step: ConnectStepDeps, tx: Transaction): Promise<void> {
  const [client, session] = await Promise.all([
    deps.clients.get(tx.clientId),
    tx.upstreamSessionId ? step.connections.sessionOwner(tx.upstreamSessionId) : null,
  ]);
  const server = serverByResource(deps.catalogue, tx.resource);
  if (!session || !server)
    throw new PageError(
      "invalid_request",
      "This request is no longer waiting for you",
      "Its sign-in or its server is gone.",
      "Go back to your application and connect again.",
    );
  const views = await step.connections.list(session.subject);
  const needed = server.connection ? views.filter((v) => v.name === server.connection?.name) : [];
  ctx.set("Cache-Control", "no-store");
  const failure = ctx.query.failed === "1" ? "Connecting the account did not complete. Try again, or cancel." : undefined;
  sendHtml(
    ctx,
    renderConnectStepPage({
      clientName: client?.clientName ?? "the application",
      serverTitle: server.title,
      signedInAs: session.login ?? session.subject,
      items: needed.map((v) => ({ name: v.name, title: v.title, account: v.account, connected: v.connected })),
      transactionId: tx.id,
      csrfToken: deps.transactions.csrfToken(tx.id),
      failure,
    }),
  );
}

/** A decision posted at the connect step: connect one account, continue, or cancel. */
export async function decideConnectStep(ctx: Koa.Context, deps: ConnectStepPageDeps, step: ConnectStepDeps, tx: Transaction, decision: string): Promise<void> {
  ctx.set("Cache-Control", "no-store");
  ctx.status = 303;
  if (decision === "continue") {
    const location = await step.upstreamLogin.finishConnecting(tx, ctx.ip);
    clearTransactionCookie(ctx, tx.id);
    ctx.redirect(location);
    return;
  }
  const session = tx.upstreamSessionId ? await step.connections.sessionOwner(tx.upstreamSessionId) : null;
  const name = decision.startsWith("connect:") ? decision.slice("connect:".length) : undefined;
  if (name !== undefined && session) {
    ctx.redirect(await step.flow.start({ subject: session.subject, name, browserSessionId: browserSessionId(ctx, true), transactionId: tx.id }));
    return;
  }
  await deps.transactions.cancelConnecting(tx.id);
  clearTransactionCookie(ctx, tx.id);
  ctx.redirect(
    clientRedirectUrl(tx.redirectUri, {
      error: "access_denied",
      error_description: "The user did not connect the account the server needs.",
      ...(tx.state ? { state: tx.state } : {}),
      iss: deps.issuer,
    }),
  );
}
