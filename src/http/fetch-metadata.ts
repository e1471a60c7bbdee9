// Fetch Metadata (Sec-Fetch-Site, -Mode, -Dest): how the browser says a request came about. A
// remembered consent is used without asking only for a top-level navigation that no other site
// started: a page on another site can send the browser to /authorize for a client the person once
// approved (an authorization server in the middle, PrefectHQ/fastmcp#3960), and without this the
// code would come back without the person seeing anything.
//
// - `none`: the person opened the URL (typed, bookmarked), or an app handed it to the browser: a
//   native client (Claude Code, VS Code, Cursor) opening the system browser at /authorize. Silent.
// - `same-origin`: a page of this broker. Silent.
// - `same-site`: another origin of the same site (another port or subdomain): not ours, so it asks.
// - `cross-site`: any other site, web clients (claude.ai, chatgpt.com) included: it asks. A web
//   client cannot be told apart from a page that pretends to be one; the cost is one click.
// - absent: every major browser sends these headers on navigations to https and loopback origins
//   (Chrome 76, Firefox 90, Safari 16.4, the last in 2023); an old browser, a plain-http LAN
//   address (INSECURE_PUBLIC_URL), or a tool that is not a browser gets the page. A wrong "ask" costs one click, a wrong "skip" a code the person never chose to give.
import type Koa from "koa";

const FIRST_PARTY_SITES = new Set(["none", "same-origin"]);

/** A top-level navigation to a document that the person or this broker started (see above). */
export function isFirstPartyNavigation(ctx: Koa.Context): boolean {
  return FIRST_PARTY_SITES.has(ctx.get("sec-fetch-site")) && ctx.get("sec-fetch-mode") === "navigate" && ctx.get("sec-fetch-dest") === "document";
}
