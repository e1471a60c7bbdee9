// A person at the connected-apps page (/account) without a screen: opens it, signs in through the
// demo IdP, reads the listed apps, posts its forms. Cookies live in an HttpBrowser, which the same
// person can use for a client's authorization too (consents are remembered per browser).
import { expect } from "@jest/globals";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";

export interface ListedApp {
  readonly grantId: string;
  readonly name: string;
  readonly verified: boolean;
  readonly redirectHost: string;
  readonly scopes: string[];
  readonly created: string;
  readonly lastUsed: string;
  readonly ends: string;
}

export interface AccountView {
  readonly status: number;
  readonly headers: Headers;
  readonly html: string;
  /** The CSRF token of the page's forms ("" when there is none). */
  readonly csrf: string;
  /** Who the page says is signed in; null on the sign-in page. */
  readonly signedInAs: string | null;
  readonly apps: ListedApp[];
}

const decode = (s: string) =>
  s
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&amp;/g, "&");
const text = (html: string) => decode(html.replace(/<[^>]+>/g, ""));

function field(section: string, cls: string): string {
  return text(new RegExp(`<dd class="${cls}">([\\s\\S]*?)</dd>`).exec(section)?.[1] ?? "");
}

export function readAccountPage(status: number, headers: Headers, html: string): AccountView {
  const apps = [...html.matchAll(/<section class="app" id="app-([^"]+)">([\s\S]*?)<\/section>/g)].map(([, grantId, section]) => ({
    grantId: grantId!,
    name: text(/<span class="app-name">([\s\S]*?)<\/span>/.exec(section!)?.[1] ?? ""),
    verified: section!.includes('class="muted verified"'),
    redirectHost: field(section!, "redirect-host"),
    scopes: field(section!, "scopes").split(", "),
    created: field(section!, "created"),
    lastUsed: field(section!, "last-used"),
    ends: field(section!, "ends"),
  }));
  return {
    status,
    headers,
    html,
    csrf: decode(/<input type="hidden" name="csrf" value="([^"]*)">/.exec(html)?.[1] ?? ""),
    signedInAs: /<strong id="signed-in-as">([^<]*)<\/strong>/.exec(html)?.[1] ?? null,
    apps,
  };
}

export class AccountVisitor {
  constructor(
    readonly brokerUrl: string,
    readonly browser = new HttpBrowser(),
  ) {}

  get pageUrl(): string {
    return `${this.brokerUrl}/account`;
  }

  async open(query = ""): Promise<AccountView> {
    const res = await this.browser.request(`${this.pageUrl}${query}`);
    return readAccountPage(res.status, res.headers, await res.text());
  }

  /** Posts one of the page's forms as it is (or with `csrf` replaced); the raw answer. */
  post(form: Record<string, string>): Promise<Response> {
    return this.browser.request(this.pageUrl, { form });
  }

  /** Posts with the CSRF token of a freshly opened page, follows the 303 back to the page. */
  async act(action: "revoke" | "revoke_all" | "sign_out", extra: Record<string, string> = {}): Promise<AccountView> {
    const { csrf } = await this.open();
    const res = await this.post({ action, csrf, ...extra });
    expect(res.status).toBe(303);
    const location = new URL(res.headers.get("location")!, this.pageUrl);
    expect(location.origin + location.pathname).toBe(this.pageUrl);
    const page = await this.browser.request(location.href);
    return readAccountPage(page.status, page.headers, await page.text());
  }

  /**
   * Signs in as `user` at the demo IdP from the page's button. Returns where the callback sent
   * the browser (the answer to the callback request itself) and the page opened after it.
   */
  async signIn(user: string, options: { selectAccount?: boolean } = {}): Promise<{ callback: Response; page: AccountView }> {
    const start = await this.open(options.selectAccount ? "?another=1" : "");
    expect(start.signedInAs).toBeNull();
    const form: Record<string, string> = { action: "sign_in", csrf: start.csrf };
    if (options.selectAccount) form.select_account = "1";
    const res = await this.post(form);
    expect(res.status).toBe(303);
    const callbackUrl = await this.browser.walk(res.headers.get("location")!, `${this.brokerUrl}/oauth/callback`, answerAs(user));
    const callback = await this.browser.request(callbackUrl.href);
    return { callback, page: await this.open() };
  }
}
