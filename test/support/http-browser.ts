// A minimal browser without a screen for tests and the benchmark: keeps cookies per host, follows
// redirects by hand, and fills the login forms of the demo IdP and the GitHub emulator. Chromium
// does the same in the e2e tests. Like a browser, every request carries the fetch metadata of a
// top-level navigation (Sec-Fetch-Site/-Mode/-Dest): "none" for a URL opened directly (a native
// client opening the system browser), "same-origin" for a form posted on the page it came from,
// and along a walk what the Fetch standard computes from the navigation's initiator. Node's
// fetch() would send `Sec-Fetch-Mode: cors` whatever it is told, so requests go through undici's
// request() and come back as a Response.
import { request as undiciRequest } from "undici";

/** The Sec-Fetch-Site values (Fetch Metadata), from the closest relation to the farthest. */
export type FetchSite = "none" | "same-origin" | "same-site" | "cross-site";
const SITE_ORDER: readonly FetchSite[] = ["none", "same-origin", "same-site", "cross-site"];

/**
 * How `url` relates to the page `initiator` that started the navigation. Same-site is taken as
 * the same scheme and host name (any port): exact for the loopback addresses tests use, and on
 * the cross-site side for sibling subdomains (no public suffix list here).
 */
export function fetchSite(initiator: string | null, url: string): FetchSite {
  if (initiator === null) return "none";
  const from = new URL(initiator);
  const to = new URL(url);
  if (from.origin === to.origin) return "same-origin";
  return from.protocol === to.protocol && from.hostname === to.hostname ? "same-site" : "cross-site";
}

export interface BrowserRequest {
  method?: string;
  form?: Record<string, string>;
  headers?: Record<string, string>;
  /** Sec-Fetch-Site; default "none" (an opened URL), "same-origin" for a form. */
  site?: FetchSite;
}

export class HttpBrowser {
  private readonly jar = new Map<string, Map<string, string>>();
  readonly visited: string[] = [];

  cookieHeader(url: string): string {
    const cookies = this.jar.get(new URL(url).host);
    return cookies ? [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") : "";
  }

  /** Cookies of `url`'s host, as a test that plays an attacker copies them into another browser. */
  cookies(url: string): Record<string, string> {
    return Object.fromEntries(this.jar.get(new URL(url).host) ?? []);
  }

  /** Sets cookies for `url`'s host, replacing those of the same name (what an attacker plants). */
  plant(url: string, cookies: Record<string, string>): void {
    const host = new URL(url).host;
    const jar = this.jar.get(host) ?? new Map<string, string>();
    this.jar.set(host, jar);
    for (const [name, value] of Object.entries(cookies)) jar.set(name, value);
  }

  private remember(url: string, res: Response): void {
    const host = new URL(url).host;
    const cookies = this.jar.get(host) ?? new Map<string, string>();
    this.jar.set(host, cookies);
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = pair!.indexOf("=");
      const name = pair!.slice(0, i);
      const value = pair!.slice(i + 1);
      if (/expires=Thu, 01 Jan 1970/i.test(c) || /max-age=0(;|$)/i.test(c) || value === "") cookies.delete(name);
      else cookies.set(name, value);
    }
  }

  async request(url: string, init: BrowserRequest = {}): Promise<Response> {
    this.visited.push(url);
    const method = init.method ?? (init.form ? "POST" : "GET");
    const cookie = this.cookieHeader(url);
    const answer = await undiciRequest(url, {
      method: method as "GET",
      headers: {
        "sec-fetch-site": init.site ?? (init.form ? "same-origin" : "none"),
        "sec-fetch-mode": "navigate",
        "sec-fetch-dest": "document",
        ...(init.form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
        ...(cookie ? { cookie } : {}),
        ...init.headers,
      },
      ...(init.form ? { body: new URLSearchParams(init.form).toString() } : {}),
    });
    const headers = new Headers();
    for (const [name, value] of Object.entries(answer.headers)) {
      for (const v of Array.isArray(value) ? value : value === undefined ? [] : [value]) headers.append(name, v);
    }
    const bytes = Buffer.from(await answer.body.arrayBuffer());
    const empty = method === "HEAD" || answer.statusCode === 204 || answer.statusCode === 304;
    const res = new Response(empty ? null : bytes, { status: answer.statusCode, headers });
    this.remember(url, res);
    return res;
  }

  /**
   * Follows redirects from `url` until one points at `stopAt` (returned, not fetched). Forms are
   * answered by `answer` (the consent page, login pages); without an answer the walk stops. The
   * walk starts as an opened URL (Sec-Fetch-Site: none, kept along its redirects); a form posted
   * on a page makes that page the initiator of what follows.
   */
  async walk(url: string, stopAt: string, answer: (url: string, html: string) => { action: string; form: Record<string, string> } | null): Promise<URL> {
    let next: { url: string; form?: Record<string, string> } = { url };
    let initiator: string | null = null;
    let site: FetchSite = "none";
    for (let hop = 0; hop < 40; hop++) {
      if (next.url.startsWith(stopAt)) return new URL(next.url);
      const here = fetchSite(initiator, next.url);
      // Along a redirect chain the farthest relation wins (Fetch, "Sec-Fetch-Site" header).
      site = SITE_ORDER.indexOf(here) > SITE_ORDER.indexOf(site) ? here : site;
      const res = await this.request(next.url, next.form ? { form: next.form, site } : { site });
      const location = res.headers.get("location");
      if (location) {
        next = { url: new URL(location, next.url).href };
        continue;
      }
      const body = await res.text();
      const reply = res.status === 200 ? answer(next.url, body) : null;
      if (!reply) throw new Error(`the walk stopped at ${next.url} (status ${res.status}): ${body.slice(0, 300)}`);
      initiator = next.url;
      next = { url: new URL(reply.action, next.url).href, form: reply.form };
      site = fetchSite(initiator, next.url);
    }
    throw new Error(`too many redirects: ${this.visited.slice(-12).join("\n")}`);
  }
}

function hidden(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)) out[m[1]!] = m[2]!.replace(/&amp;/g, "&").replace(/&quot;/g, '"');
  return out;
}

function formAction(html: string): string {
  return (/<form[^>]*action="([^"]+)"/.exec(html)?.[1] ?? "").replace(/&amp;/g, "&");
}

/** Answers the broker's consent page (allow or deny) and the upstream login forms as `user`. */
export function answerAs(user: string, decision: "allow" | "deny" = "allow", upstreamDecision: "authorize" | "cancel" = "authorize") {
  return (_url: string, html: string) => {
    if (html.includes('name="csrf"')) return { action: formAction(html), form: { ...hidden(html), decision } };
    if (html.includes('name="username"')) return { action: formAction(html), form: { ...hidden(html), username: user, decision: upstreamDecision } };
    return null;
  };
}

/** Answers like answerAs(user), keeping each consent page it is shown in `pages`, in order. */
export function answerRecordingConsent(user: string, pages: string[]) {
  const answer = answerAs(user);
  return (url: string, html: string) => {
    if (html.includes('name="csrf"')) pages.push(html);
    return answer(url, html);
  };
}

/**
 * Answers like answerAs, and also submits the page oidc-provider shows when another account signs
 * in over an open session (an auto-submitting form that ends the old session: a browser runs its
 * script; HttpBrowser runs none).
 */
export function answerSwitchingTo(user: string) {
  const answer = answerAs(user);
  return (url: string, html: string) => {
    const reply = answer(url, html);
    if (reply || !html.includes("<title>Submitting Callback</title>")) return reply;
    const decode = (v: string) => v.replace(/&amp;/g, "&").replace(/&quot;/g, '"');
    const action = decode(/<form method="post" action="([^"]+)"/.exec(html)![1]!);
    const form = Object.fromEntries([...html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/>/g)].map((m) => [m[1]!, decode(m[2]!)]));
    return { action, form };
  };
}
