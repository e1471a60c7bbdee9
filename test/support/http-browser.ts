// A minimal browser without a screen for tests and the benchmark: keeps cookies per host, follows
// redirects by hand, and fills the login forms of the demo IdP and the GitHub emulator. Chromium
// does the same in the e2e tests.
export class HttpBrowser {
  private readonly jar = new Map<string, Map<string, string>>();
  readonly visited: string[] = [];

  cookieHeader(url: string): string {
    const cookies = this.jar.get(new URL(url).host);
    return cookies ? [...cookies].map(([k, v]) => `${k}=${v}`).join("; ") : "";
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
      if (/expires=Thu, 01 Jan 1970/i.test(c) || value === "") cookies.delete(name);
      else cookies.set(name, value);
    }
  }

  async request(url: string, init: { method?: string; form?: Record<string, string>; headers?: Record<string, string> } = {}): Promise<Response> {
    this.visited.push(url);
    const res = await fetch(url, {
      method: init.method ?? (init.form ? "POST" : "GET"),
      redirect: "manual",
      headers: {
        ...(init.form ? { "content-type": "application/x-www-form-urlencoded" } : {}),
        ...(this.cookieHeader(url) ? { cookie: this.cookieHeader(url) } : {}),
        ...init.headers,
      },
      ...(init.form ? { body: new URLSearchParams(init.form).toString() } : {}),
    });
    this.remember(url, res);
    return res;
  }

  /**
   * Follows redirects from `url` until one points at `stopAt` (returned, not fetched). Forms are
   * answered by `answer` (the consent page, login pages); without an answer the walk stops.
   */
  async walk(url: string, stopAt: string, answer: (url: string, html: string) => { action: string; form: Record<string, string> } | null): Promise<URL> {
    let next: { url: string; form?: Record<string, string> } = { url };
    for (let hop = 0; hop < 20; hop++) {
      if (next.url.startsWith(stopAt)) return new URL(next.url);
      const res = await this.request(next.url, next.form ? { form: next.form } : {});
      const location = res.headers.get("location");
      if (location) {
        next = { url: new URL(location, next.url).href };
        continue;
      }
      const body = await res.text();
      const reply = res.status === 200 ? answer(next.url, body) : null;
      if (!reply) throw new Error(`the walk stopped at ${next.url} (status ${res.status}): ${body.slice(0, 300)}`);
      next = { url: new URL(reply.action, next.url).href, form: reply.form };
    }
    throw new Error("too many redirects");
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
