// Completes a login at the demo identity provider without a browser: follows the redirects,
// posts the login form, and returns the final redirect to `redirectUri` (code and state in it).
// The e2e tests do the same with Chromium.
export async function loginWithoutBrowser(authorizationUrl: string, username: string, redirectUri: string): Promise<URL> {
  const cookies = new Map<string, string>();
  const cookieHeader = () => [...cookies].map(([k, v]) => `${k}=${v}`).join("; ");
  const remember = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";");
      const i = pair!.indexOf("=");
      cookies.set(pair!.slice(0, i), pair!.slice(i + 1));
    }
  };
  let url = authorizationUrl;
  let init: RequestInit = {};
  for (let hop = 0; hop < 15; hop++) {
    if (url.startsWith(redirectUri)) return new URL(url);
    const res = await fetch(url, { ...init, redirect: "manual", headers: { ...(init.headers as Record<string, string>), cookie: cookieHeader() } });
    remember(res);
    init = {};
    const location = res.headers.get("location");
    if (location) {
      url = new URL(location, url).href;
      continue;
    }
    const body = await res.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(body)?.[1];
    if (res.status === 200 && action) {
      url = new URL(action.replace(/&amp;/g, "&"), url).href;
      init = { method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams({ username }).toString() };
      continue;
    }
    throw new Error(`login stopped at ${url} with status ${res.status}`);
  }
  throw new Error("too many redirects during login");
}
