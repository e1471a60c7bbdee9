// The consent page: who is asking (name, logo, id, where it will send you back), whether it
// registered itself, what it may do, and where you will sign in. Allow and Deny post the form.
import { html } from "./html.ts";
import { page } from "./layout.ts";
import type { RegisteredClient } from "../grants/types.ts";
import { isLoopbackHost } from "../config.ts";

const SCOPE_TEXT: Record<string, string> = {
  mcp: "Use the MCP server's tools and data as you",
  offline_access: "Stay connected when you are not using it (refresh tokens)",
};

export interface ConsentPageInput {
  readonly client: RegisteredClient;
  readonly redirectUri: string;
  readonly scope: string;
  readonly providerName: string;
  readonly transactionId: string;
  readonly csrfToken: string;
  readonly resource: string;
}

export function renderConsentPage(input: ConsentPageInput): string {
  const { client } = input;
  const name = client.clientName ?? "An unnamed application";
  const redirect = new URL(input.redirectUri);
  const redirectHost = redirect.host;
  // Native MCP clients come back to a loopback address: say what that means to a non-developer.
  const onThisComputer = isLoopbackHost(redirect.hostname);
  const logo = client.logoUri?.startsWith("https://") ? client.logoUri : null;
  return page(
    `Allow ${name}?`,
    html`<div class="client">
${logo ? html`<img src="${logo}" alt="" width="48" height="48">` : ""}
<div><h1>Allow <span id="client-name">${name}</span> to connect?</h1>
<p class="return-to">It will return to <strong id="redirect-host">${redirectHost}</strong>${onThisComputer ? html` <span class="muted">(an app on this computer)</span>` : ""}</p></div>
</div>
${
  client.registrationType === "dynamic"
    ? html`<p class="warning"><span class="badge" id="unverified">Unverified</span> This application registered itself. Nobody has checked who made it: allow it only if you started this connection yourself.</p>`
    : ""
}
<p>After you allow it, you will sign in with <strong id="provider-name">${input.providerName}</strong>.</p>
<p>It will be able to:</p>
<ul class="scopes">${input.scope.split(" ").map((s) => html`<li>${SCOPE_TEXT[s] ?? s}</li>`)}</ul>
<dl>
<dt>Application ID</dt><dd><code>${client.id}</code></dd>
${client.clientUri ? html`<dt>Website</dt><dd>${client.clientUri}</dd>` : ""}
<dt>Redirect address</dt><dd>${input.redirectUri}</dd>
<dt>Resource</dt><dd>${input.resource}</dd>
</dl>
<form method="post" action="consent">
<input type="hidden" name="transaction" value="${input.transactionId}">
<input type="hidden" name="csrf" value="${input.csrfToken}">
<div class="actions">
<button type="submit" name="decision" value="deny">Deny</button>
<button type="submit" name="decision" value="allow" class="primary">Allow</button>
</div>
</form>`,
  );
}
