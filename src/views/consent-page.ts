// The consent page: who is asking (name, id, where it will send you back), whether it registered
// itself, which service it wants, what it may do and for how long, who is signed in in this
// browser, and where you will sign in. Allow, Deny and "Not you?" post the form; the technical
// details (ids and addresses) follow it, so that the decision fits a phone's first screenful.
// A client nobody checked (self-registered, or described by a host not in CIMD_TRUSTED_HOSTS) can
// call itself anything, "Claude" included: the page leads with who vouches for it instead (the
// host of its metadata document, or where its redirect URI sends the code) and gives its name as
// a claim. Clients the operator registered or trusts are named by their name.
// The client's logo_uri is never loaded: the person's browser would contact a host the client
// chose (a tracking pixel at the moment of consent). A neutral initial stands in for it.
import { createHash } from "node:crypto";
import { html, type SafeHtml } from "./html.ts";
import { page } from "./layout.ts";
import type { RegisteredClient } from "../grants/types.ts";
import { isLoopbackHost } from "../config/load.ts";

/** What the page says about a scope when the operator said nothing (SCOPE_DESCRIPTIONS adds more). */
const SCOPE_TEXT: Readonly<Record<string, string>> = {
  mcp: "Use the MCP server's tools and data as you",
  offline_access: "Stay connected when you are not using it (refresh tokens)",
};

/** How many colours layout.ts has for the initial (.avatar.c0 … .c7). */
const AVATAR_COLOURS = 8;

export interface ConsentPageInput {
  readonly client: RegisteredClient;
  readonly redirectUri: string;
  readonly scope: string;
  readonly providerName: string;
  /** RESOURCE_NAME: the protected service the client wants to reach. */
  readonly resourceName: string;
  /** Who last signed in upstream in this browser, if anyone. */
  readonly signedInAs?: string | undefined;
  /** SESSION_IDLE_TIMEOUT_SECONDS and SESSION_MAX_AGE_SECONDS. */
  readonly idleTimeoutSeconds: number;
  readonly maxAgeSeconds: number;
  readonly transactionId: string;
  readonly csrfToken: string;
  readonly resource: string;
  /** SCOPE_DESCRIPTIONS (config.clients.scopes.descriptions): what each scope lets the client do. */
  readonly scopeDescriptions?: Readonly<Record<string, string>> | undefined;
}

const UNITS = [
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
] as const;

/**
 * A duration for people: "1 day", "12 hours", "90 minutes", "30 days". The largest unit that
 * divides it exactly, unless that would need 2 or more of the next larger unit: then that larger
 * unit, rounded, and said to be approximate ("about 3 days" for 3 days and 1 hour).
 */
export function humanizeSeconds(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  const say = (n: number, unit: string) => `${n} ${unit}${n === 1 ? "" : "s"}`;
  for (const [unit, size] of UNITS) {
    if (s % size === 0 && s >= size) return say(s / size, unit);
    if (s >= 2 * size) return `about ${say(Math.round(s / size), unit)}`;
  }
  return say(s, "second");
}

/** The sentence about how long the access lasts, from the grant deadlines of the configuration. */
export function accessDurationText(idleTimeoutSeconds: number, maxAgeSeconds: number): string {
  const atMost = humanizeSeconds(maxAgeSeconds);
  // An idle timeout as long as the maximum age never ends anything first: not worth a clause.
  if (idleTimeoutSeconds >= maxAgeSeconds) return `Access lasts until you revoke it; it ends after ${atMost} at most.`;
  return `Access lasts until you revoke it; it ends after ${humanizeSeconds(idleTimeoutSeconds)} unused and after ${atMost} at most.`;
}

/** The first letter or digit of the name, upper-cased; "?" when it has none. */
export function initialOf(name: string | null): string {
  const first = name ? /[\p{L}\p{N}]/u.exec(name)?.[0] : undefined;
  return first ? first.toLocaleUpperCase("en") : "?";
}

/** A colour class for the initial that stays the same for a client and differs between clients. */
function colourOf(clientId: string): string {
  return `c${createHash("sha256").update(clientId).digest()[0]! % AVATAR_COLOURS}`;
}

/**
 * Who the page says is asking. A verified client by its name. Any other by who vouches for it: the
 * host that publishes its metadata document, else the host its redirect URI sends the code to, or
 * "an app on this computer" for a loopback address or an app scheme; its own name is only a claim.
 */
export interface AskingParty {
  readonly verified: boolean;
  /** What the heading names: the client's name, a host, or "An app on this computer". */
  readonly lead: string;
  /** What the question names ("Allow … to connect?"). */
  readonly short: string;
  /** The host that vouches (unverified clients with a host). */
  readonly host: string | null;
}

const ON_THIS_COMPUTER = "An app on this computer";

export function askingParty(client: RegisteredClient, redirectUri: string): AskingParty {
  const name = client.clientName ?? "An unnamed application";
  const verified = client.registrationType === "manual" || client.metadataDocument?.verified === true;
  if (verified) return { verified, lead: name, short: name, host: null };
  if (client.metadataDocument) return { verified, lead: client.metadataDocument.host, short: client.metadataDocument.host, host: client.metadataDocument.host };
  const redirect = new URL(redirectUri);
  const web = redirect.protocol === "https:" || redirect.protocol === "http:";
  if (!web || isLoopbackHost(redirect.hostname)) return { verified, lead: ON_THIS_COMPUTER, short: "this app", host: null };
  return { verified, lead: redirect.host, short: redirect.host, host: redirect.host };
}

/** Where the code goes, under the heading: an app scheme's app, or the redirect's host (on this computer?). */
function returnLine(input: ConsentPageInput, asking: AskingParty): SafeHtml {
  const { client } = input;
  const redirect = new URL(input.redirectUri);
  // Native MCP clients come back to a loopback address: say what that means to a non-developer.
  const onThisComputer = isLoopbackHost(redirect.hostname) || client.applicationType === "native";
  // An app scheme (cursor://…): the operating system hands the code to whichever app claims it.
  const appScheme =
    redirect.protocol !== "https:" && redirect.protocol !== "http:"
      ? `${redirect.protocol}${input.redirectUri.slice(redirect.protocol.length).startsWith("//") ? "//" : ""}`
      : null;
  // One line under the heading: the name an unverified client gives itself, and where the code goes.
  const it = asking.verified
    ? "It"
    : html`<span id="name-claim">${client.clientName ? html`It calls itself “<span id="client-name">${client.clientName}</span>”` : "It gives no name"}</span> and`;
  const saysOnThisComputer = onThisComputer && asking.lead !== ON_THIS_COMPUTER;
  return appScheme
    ? html`<p class="return-to" id="app-scheme">${it} returns to the app that opens <strong id="redirect-host">${appScheme}</strong> links on this computer.</p>`
    : html`<p class="return-to">${it} will return to <strong id="redirect-host">${redirect.host}</strong>${saysOnThisComputer ? html` <span class="muted">(an app on this computer)</span>` : ""}</p>`;
}

/** Who vouches for the client: a trusted or untrusted metadata document's host, or nobody (it registered itself). */
function vouchingNotice(client: RegisteredClient): SafeHtml | "" {
  if (client.metadataDocument)
    return client.metadataDocument.verified
      ? html`<p class="notice" id="vouched-by"><span class="verified" id="verified">Verified</span> This application is described by <strong id="document-host">${client.metadataDocument.host}</strong>, which this server trusts.</p>`
      : html`<p class="warning" id="vouched-by"><span class="badge" id="unverified">Unverified</span> <strong id="document-host">${client.metadataDocument.host}</strong> vouches for this application: it publishes the application's details. Allow it only if you trust ${client.metadataDocument.host} and started this connection yourself.</p>`;
  return client.registrationType === "dynamic"
    ? html`<p class="warning"><span class="badge" id="unverified">Unverified</span> It registered itself; nobody checked who made it. Allow it only if you started this yourself.</p>`
    : "";
}

/** Who is signed in in this browser, and the way to allow with another account. */
function signedInLine(input: ConsentPageInput): SafeHtml | "" {
  return input.signedInAs
    ? html`<p class="signed-in" id="signed-in">You are signed in as <strong id="signed-in-as">${input.signedInAs}</strong> (${input.providerName}).
<button type="submit" name="decision" value="allow_other_account" class="link" id="not-you">Not you? Allow with another account</button></p>`
    : "";
}

/** The technical details, after the form: ids and addresses. */
function details(input: ConsentPageInput): SafeHtml {
  const { client } = input;
  return html`<dl>
<dt>Application ID</dt><dd><code>${client.id}</code></dd>
${client.clientUri ? html`<dt>Website</dt><dd>${client.clientUri}</dd>` : ""}
<dt>Redirect address</dt><dd>${input.redirectUri}</dd>
<dt>Resource</dt><dd>${input.resource}</dd>
</dl>`;
}

export function renderConsentPage(input: ConsentPageInput): string {
  const { client } = input;
  const name = client.clientName ?? "An unnamed application";
  const asking = askingParty(client, input.redirectUri);
  const heading = asking.verified
    ? html`<h1><span id="client-name">${name}</span> wants to connect to <span id="resource-name">${input.resourceName}</span></h1>`
    : html`<h1><span id="vouching-party">${asking.lead}</span> wants to connect to <span id="resource-name">${input.resourceName}</span></h1>`;
  return page(
    `${asking.lead} wants to connect to ${input.resourceName}`,
    html`<div class="client">
<div class="avatar ${colourOf(client.id)}" id="client-initial" aria-hidden="true">${initialOf(asking.verified ? client.clientName : asking.host)}</div>
<div>${heading}
${returnLine(input, asking)}</div>
</div>
${vouchingNotice(client)}
<p>After you allow it, you will sign in with <strong id="provider-name">${input.providerName}</strong>.</p>
<p>It will be able to:</p>
<ul class="scopes">${input.scope.split(" ").map((s) => html`<li>${input.scopeDescriptions?.[s] ?? SCOPE_TEXT[s] ?? s}</li>`)}</ul>
<p class="muted" id="access-duration">${accessDurationText(input.idleTimeoutSeconds, input.maxAgeSeconds)}</p>
<form method="post" action="consent">
<input type="hidden" name="transaction" value="${input.transactionId}">
<input type="hidden" name="csrf" value="${input.csrfToken}">
${signedInLine(input)}
<p class="question">Allow <strong>${asking.short}</strong> to connect?</p>
<div class="actions">
<button type="submit" name="decision" value="deny">Deny</button>
<button type="submit" name="decision" value="allow" class="primary">Allow</button>
</div>
</form>
${details(input)}`,
  );
}
