// The end of the connected-apps page's upstream sign-in, reached through /oauth/callback when the
// state is an account sign-in's: back to /account when admitted; the refusal page (with a way to
// try another account) when the access policy does not admit the account; a page saying what
// failed otherwise.
import type Koa from "koa";
import { browserSessionId, useBrowserSessionId } from "../http/browser-session.ts";
import { clearTransactionCookie, transactionBinding } from "../http/transaction-cookie.ts";
import { PageError } from "../grants/errors.ts";
import { sendHtml } from "../http/html-page.ts";
import type { CallbackBranch } from "../http/callback-branch.ts";
import type { AccountSignInOutcome } from "../grants/account-sign-in.ts";
import { renderAccessRefusedPage } from "../views/access-refused-page.ts";
import { accountUrl, type AccountDeps } from "./deps.ts";

const AGAIN = "Sign in again from the connected apps page.";

function failure(reason: Extract<AccountSignInOutcome, { kind: "failed" }>["reason"], providerName: string): PageError {
  if (reason === "cancelled")
    return new PageError("invalid_request", "Sign-in cancelled", `The sign-in at ${providerName} was cancelled or refused: you are not signed in.`, AGAIN);
  if (reason === "unavailable")
    return new PageError(
      "temporarily_unavailable",
      `${providerName} is not reachable`,
      `${providerName} could not be reached to complete the sign-in.`,
      "Try again in a moment.",
    );
  if (reason === "misconfigured")
    return new PageError(
      "server_error",
      "Sign-in could not be completed",
      `${providerName} did not accept this service's sign-in request.`,
      "Tell the operator of this service.",
      { status: 502 },
    );
  return new PageError("server_error", "Sign-in could not be completed", `The sign-in at ${providerName} could not be completed.`, AGAIN, { status: 502 });
}

export function accountSignInCallback(deps: AccountDeps): CallbackBranch {
  return {
    owns: (state) => deps.signIn.owns(state),
    async complete(ctx: Koa.Context, callbackUrl: URL) {
      const outcome = await deps.signIn.complete({
        callbackUrl,
        browserSessionId: browserSessionId(ctx, false),
        bindingOf: (loginId) => transactionBinding(ctx, loginId),
        ip: ctx.ip,
      });
      clearTransactionCookie(ctx, outcome.loginId);
      ctx.set("Cache-Control", "no-store");
      if (outcome.kind === "failed") throw failure(outcome.reason, deps.providerName);
      if (outcome.kind === "signed_in") {
        // A new session id: whoever holds a copy of the old one (planted before the sign-in) sees nothing.
        useBrowserSessionId(ctx, outcome.browserSessionId);
        ctx.redirect(accountUrl(deps.publicUrl));
        return;
      }
      const signInAgainUrl = accountUrl(deps.publicUrl, { another: "1" });
      ctx.state.refusal = "policy_denied";
      sendHtml(ctx, renderAccessRefusedPage({ account: outcome.account, resourceName: deps.resourceName, signInAgainUrl }), 403);
    },
  };
}
