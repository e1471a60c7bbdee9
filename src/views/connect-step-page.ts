// The consent page's connect step: the user signed in, and the server needs accounts of theirs at
// other services (connected accounts). Each is listed with what it is needed for; a Connect button
// goes to the service, which comes back here. Continue (once every one is connected) sends the
// browser back to the application with its authorization; Cancel tells it the user refused.
import { html } from "./html.ts";
import { page } from "./layout.ts";

export interface ConnectStepItem {
  readonly name: string;
  readonly title: string;
  /** The account connected, when it is. */
  readonly account: string | null;
  readonly connected: boolean;
}

export interface ConnectStepInput {
  readonly clientName: string;
  readonly serverTitle: string;
  readonly signedInAs: string;
  readonly items: readonly ConnectStepItem[];
  readonly transactionId: string;
  readonly csrfToken: string;
  /** What went wrong at the last connect attempt (cancelled, refused), said above the list. */
  readonly failure?: string | undefined;
}

export function renderConnectStepPage(input: ConnectStepInput): string {
  const ready = input.items.every((i) => i.connected);
  const first = input.items.find((i) => !i.connected);
  return page(
    first ? `Connect your ${first.title} account` : `Continue to ${input.clientName}`,
    html`<h1 id="connect-heading">${first ? html`Connect your ${first.title} account` : html`Your accounts are connected`}</h1>
<p>Signed in as <strong id="signed-in-as">${input.signedInAs}</strong>. <strong>${input.serverTitle}</strong> acts for you at other services, with your own account there.</p>
${input.failure ? html`<p class="notice" id="connect-failure">${input.failure}</p>` : ""}
<form method="post" action="consent">
<input type="hidden" name="transaction" value="${input.transactionId}">
<input type="hidden" name="csrf" value="${input.csrfToken}">
<ul class="scopes" id="connections">${input.items.map(
      (item) =>
        html`<li data-connection="${item.name}">${item.connected ? html`${item.title}: connected as <strong>${item.account ?? "your account"}</strong>` : html`${item.title} — needed by ${input.serverTitle} <button type="submit" name="decision" value="connect:${item.name}" class="primary">Connect ${item.title}</button>`}</li>`,
    )}</ul>
<div class="actions">
<button type="submit" name="decision" value="deny">Cancel</button>
${ready ? html`<button type="submit" name="decision" value="continue" class="primary" id="continue">Continue to ${input.clientName}</button>` : ""}
</div>
</form>`,
  );
}
