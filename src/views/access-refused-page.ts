// The page a person sees when they signed in upstream with an account the access policy does not
// admit: which account it was, that it may not use this service, how to try another one, and (for
// a client's authorization) a button back to the application, which learns access_denied.
import { html } from "./html.ts";
import { page } from "./layout.ts";

export interface AccessRefusedPageInput {
  /** The account the policy refused, as the sign-in's outcome names it. */
  readonly account: { readonly login: string; readonly providerName: string };
  readonly resourceName: string;
  /** The application to return to; absent when the sign-in came from the connected-apps page. */
  readonly returnTo?: { readonly url: string; readonly clientName: string | null } | undefined;
  /** Where to start another sign-in (the connected-apps page). */
  readonly signInAgainUrl?: string | undefined;
}

export function renderAccessRefusedPage(input: AccessRefusedPageInput): string {
  const { login, providerName } = input.account;
  const app = input.returnTo ? (input.returnTo.clientName ?? "your application") : null;
  return page(
    `Not allowed: ${input.resourceName}`,
    html`<h1>This account cannot use <span id="resource-name">${input.resourceName}</span></h1>
<p>You signed in to ${providerName} as <strong id="signed-in-as">${login}</strong>. That account is not allowed to use ${input.resourceName}: nothing was shared with ${app ?? "any application"}.</p>
<p class="muted" id="try-another">To use another account, sign out of ${providerName} (or switch accounts there)${
      app ? html`, then connect again from ${app}` : html`, then sign in again`
    }. If you think this account should have access, ask the administrator of ${input.resourceName}.</p>
<div class="actions">
${input.returnTo ? html`<a class="button primary" id="return-to-client" href="${input.returnTo.url}">Return to ${app}</a>` : ""}
${input.signInAgainUrl ? html`<a class="button" id="sign-in-again" href="${input.signInAgainUrl}">Sign in with another account</a>` : ""}
</div>`,
    { className: "error" },
  );
}
