// The connected-apps page (/account): signed out, a button to sign in with the upstream IdP;
// signed in, each application that can use the service with the user's account, what it may do and
// until when, with Revoke per application, Revoke all and Sign out. Plain forms: no JavaScript.
import { html, type SafeHtml } from "./html.ts";
import { page } from "./layout.ts";
import type { ConnectedApp } from "../grants/connected-apps.ts";
import type { ConnectionView } from "../grants/connections.ts";

/** What the page confirms after a POST (carried in the redirect's query). */
export type AccountNotice = "revoked" | "revoked_all" | "signed_out" | "connected" | "connect_failed" | "disconnected";

export const ACCOUNT_NOTICES: readonly AccountNotice[] = ["revoked", "revoked_all", "signed_out", "connected", "connect_failed", "disconnected"];

export interface AccountSignInPageInput {
  readonly resourceName: string;
  readonly providerName: string;
  readonly csrfToken: string;
  /** Ask the IdP to let the person choose another account (after a refusal). */
  readonly selectAccount?: boolean;
  readonly notice?: AccountNotice | undefined;
  /** The application the "revoked" notice is about, when known. */
  readonly revokedApp?: string | undefined;
}

export interface ConnectedAppsPageInput {
  readonly resourceName: string;
  readonly providerName: string;
  /** Who signed in (login, or the subject when the IdP gave no login). */
  readonly signedInAs: string;
  readonly csrfToken: string;
  readonly apps: readonly ConnectedApp[];
  readonly notice?: AccountNotice | undefined;
  readonly revokedApp?: string | undefined;
  /** The services of `connections` and the user's accounts there (none configured: no section). */
  readonly connections?: readonly ConnectionView[] | undefined;
}

const dateFormat = new Intl.DateTimeFormat("en-GB", { dateStyle: "medium", timeStyle: "short", timeZone: "UTC" });

function when(date: Date): SafeHtml {
  return html`<time datetime="${date.toISOString()}">${dateFormat.format(date)} UTC</time>`;
}

function noticeText(notice: AccountNotice, resourceName: string, revokedApp: string | undefined): string {
  if (notice === "revoked") return `${revokedApp ? `“${revokedApp}”` : "The application"} was disconnected: it can no longer use ${resourceName}.`;
  if (notice === "connected") return "Your account was connected: the servers that need it can use it now.";
  if (notice === "connect_failed") return "Connecting the account did not complete: nothing was changed. Try again.";
  if (notice === "disconnected") return "The account was disconnected: the applications using servers that need it were disconnected too.";
  if (notice === "revoked_all") return `Every application was disconnected: none can use ${resourceName} with your account now.`;
  return "You are signed out. This browser no longer remembers your sign-in or the applications you allowed in it.";
}

function notice(input: { notice?: AccountNotice | undefined; resourceName: string; revokedApp?: string | undefined }): SafeHtml | "" {
  return input.notice ? html`<p class="notice" id="notice" role="status">${noticeText(input.notice, input.resourceName, input.revokedApp)}</p>` : "";
}

export function renderAccountSignInPage(input: AccountSignInPageInput): string {
  return page(
    `Connected apps: ${input.resourceName}`,
    html`<h1>Connected apps</h1>
${notice(input)}
<p>See which applications can use <strong id="resource-name">${input.resourceName}</strong> with your account, and disconnect them.</p>
<p class="muted">Sign in with ${input.providerName} to continue. Signing in here shares nothing with any application.</p>
<form method="post" action="account">
<input type="hidden" name="csrf" value="${input.csrfToken}">
${input.selectAccount ? html`<input type="hidden" name="select_account" value="1">` : ""}
<div class="actions">
<button type="submit" name="action" value="sign_in" class="primary" id="sign-in">Sign in with ${input.providerName}</button>
</div>
</form>`,
  );
}

function appSection(app: ConnectedApp, input: ConnectedAppsPageInput): SafeHtml {
  const name = app.clientName ?? "An unnamed application";
  return html`<section class="app" id="app-${app.grantId}">
<h2><span class="app-name">${name}</span> ${
    app.verified
      ? html`<span class="muted verified">Verified</span>`
      : html`<span class="badge" title="This application registered itself; nobody has checked who made it.">Unverified</span>`
  }</h2>
<dl>
<dt>Returns to</dt><dd class="redirect-host">${app.redirectHosts.length > 0 ? app.redirectHosts.join(", ") : "—"}</dd>
<dt>Access</dt><dd class="scopes">${app.scopes.map((s, i) => html`${i > 0 ? ", " : ""}<code>${s}</code>`)}</dd>
<dt>Connected</dt><dd class="created">${when(app.createdAt)}</dd>
<dt>Last used</dt><dd class="last-used">${when(app.lastUsedAt)}</dd>
<dt>Ends</dt><dd class="ends">${when(app.endsAt)}</dd>
</dl>
<form method="post" action="account">
<input type="hidden" name="csrf" value="${input.csrfToken}">
<input type="hidden" name="grant" value="${app.grantId}">
<div class="actions">
<button type="submit" name="action" value="revoke" class="danger" aria-label="Revoke ${name}">Revoke</button>
</div>
</form>
</section>`;
}

/** The apps, under a heading per MCP server when they use more than one (a catalogue of several). */
function byServer(apps: readonly ConnectedApp[], input: ConnectedAppsPageInput): SafeHtml[] {
  const servers = [...new Set(apps.map((a) => a.server))];
  if (servers.length < 2) return apps.map((app) => appSection(app, input));
  return servers.map(
    (server) => html`<section class="server"><h2 class="server-name">${server}</h2>
${apps.filter((a) => a.server === server).map((app) => appSection(app, input))}</section>`,
  );
}

function connectionSection(c: ConnectionView, csrfToken: string): SafeHtml {
  return html`<section class="connection" id="connection-${c.name}">
<h3>${c.title}</h3>
<dl>
<dt>Account</dt><dd class="connection-account">${c.connected ? (c.account ?? "connected") : c.broken ? "no longer accepted by the service: connect it again" : "not connected"}</dd>
${c.connected && c.scope ? html`<dt>Access</dt><dd>${c.scope.split(/[ ,]+/).map((s, i) => html`${i > 0 ? ", " : ""}<code>${s}</code>`)}</dd>` : ""}
${c.connectedAt ? html`<dt>Connected</dt><dd>${when(c.connectedAt)}</dd>` : ""}
${c.lastUsedAt ? html`<dt>Last used</dt><dd>${when(c.lastUsedAt)}</dd>` : ""}
</dl>
<form method="post" action="account/connect/${c.name}">
<input type="hidden" name="csrf" value="${csrfToken}">
<div class="actions">
<button type="submit" name="action" value="connect" class="primary">${c.connected ? "Reconnect" : "Connect"} ${c.title}</button>
${c.connected || c.broken ? html`<button type="submit" name="action" value="disconnect" class="danger">Disconnect</button>` : ""}
</div>
</form>
</section>`;
}

function connectionsSection(input: ConnectedAppsPageInput): SafeHtml | "" {
  if (!input.connections?.length) return "";
  return html`<section id="connections"><h2>Connected accounts</h2>
<p class="muted">Your own accounts at other services, used by the servers that act there for you.</p>
${input.connections.map((c) => connectionSection(c, input.csrfToken))}</section>`;
}

export function renderConnectedAppsPage(input: ConnectedAppsPageInput): string {
  const count = input.apps.length;
  return page(
    `Connected apps: ${input.resourceName}`,
    html`<h1>Connected apps</h1>
<p class="muted">Signed in to ${input.providerName} as <strong id="signed-in-as">${input.signedInAs}</strong></p>
${notice(input)}
${
  count === 0
    ? html`<p id="no-apps">No application can use <strong>${input.resourceName}</strong> with your account.</p>`
    : html`<p id="app-count">${count === 1 ? "One application" : `${count} applications`} can use <strong>${input.resourceName}</strong> with your account. Revoke one to disconnect it at once; to use it again, you would connect it again.</p>
${byServer(input.apps, input)}`
}
${connectionsSection(input)}
<form method="post" action="account">
<input type="hidden" name="csrf" value="${input.csrfToken}">
<div class="actions">
${count > 0 ? html`<button type="submit" name="action" value="revoke_all" class="danger" id="revoke-all">Revoke all</button>` : ""}
<button type="submit" name="action" value="sign_out" id="sign-out">Sign out</button>
</div>
</form>`,
  );
}
