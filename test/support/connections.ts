// Connected accounts in tests: a broker whose users sign in at a real OIDC issuer while its servers
// need each user's own GitHub account (the GitHub emulator) and an account at a plain OAuth 2
// service (the OAuth 2 emulator), and a browser that walks consent → sign-in → connect → continue.
import { startGitHubEmulator, type GitHubEmulator } from "./github-emulator.ts";
import { startOAuth2Emulator, type OAuth2Emulator } from "./oauth2-emulator.ts";
import { startIssuerCatalogue, type IssuerCatalogue } from "./issuer-catalogue.ts";
import { HttpBrowser, answerAs } from "./http-browser.ts";

export interface ConnectedAccounts {
  readonly at: IssuerCatalogue;
  readonly github: GitHubEmulator;
  readonly tracker: OAuth2Emulator;
  close(): Promise<void>;
}

/**
 * The emulators and a broker with `servers` (YAML lines of a `servers:` list) and two
 * connections, `github` and `tracker`.
 */
export async function startConnectedAccounts(
  groups: Record<string, string[]>,
  servers: string[],
  env: Record<string, string> = {},
): Promise<ConnectedAccounts> {
  // The broker's callback is known once it listens: the emulator reads the list at each request.
  const redirectUris: string[] = [];
  const [github, tracker] = await Promise.all([
    startGitHubEmulator({ clientId: "Iv1.connections", clientSecret: "github-connection-secret" }),
    startOAuth2Emulator({ clientId: "tracker-app", clientSecret: "tracker-secret", redirectUris }),
  ]);
  const at = await startIssuerCatalogue(
    groups,
    [
      "servers:",
      ...servers,
      "connections:",
      "  github:",
      "    provider: github",
      `    url: ${github.url}`,
      `    apiUrl: ${github.apiUrl}`,
      "    clientId: Iv1.connections",
      "    clientSecret: github-connection-secret",
      "    scopes: [repo]",
      ...trackerConnection(tracker, ["issues"]),
    ],
    env,
  );
  redirectUris.push(`${at.broker.url}/oauth/connect/callback`);
  return {
    at,
    github,
    tracker,
    async close() {
      await at.close();
      await Promise.all([github.close(), tracker.close()]);
    },
  };
}

/** The `connections:` entry of the OAuth 2 emulator, named tracker (YAML lines). */
export function trackerConnection(tracker: OAuth2Emulator, scopes: readonly string[] = []): string[] {
  return [
    "  tracker:",
    "    provider: oauth2",
    "    title: Tracker",
    `    authorizeUrl: ${tracker.authorizeUrl}`,
    `    tokenUrl: ${tracker.tokenUrl}`,
    `    revokeUrl: ${tracker.revokeUrl}`,
    `    userinfoUrl: ${tracker.userinfoUrl}`,
    "    clientId: tracker-app",
    "    clientSecret: tracker-secret",
    ...(scopes.length ? [`    scopes: [${scopes.join(", ")}]`] : []),
  ];
}

function hidden(html: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"/g)) out[m[1]!] = m[2]!.replace(/&amp;/g, "&").replace(/&quot;/g, '"');
  return out;
}

/**
 * Answers the pages of an authorization that connects accounts: the consent page (allow), the
 * issuer's login as `user`, the GitHub emulator's login as `githubUser`, and the connect step
 * (Connect the first account not connected, then Continue). Every page shown is kept in `pages`.
 */
export function answerConnecting(user: string, githubUser: string, pages: string[] = []) {
  const signIn = answerAs(user);
  const atGitHub = answerAs(githubUser);
  return (url: string, html: string) => {
    pages.push(html);
    if (html.includes('id="connect-heading"')) {
      const connect = /value="(connect:[^"]+)"/.exec(html)?.[1];
      return { action: "consent", form: { ...hidden(html), decision: connect ?? "continue" } };
    }
    if (html.includes("Sign in to GitHub emulator")) return atGitHub(url, html);
    return signIn(url, html);
  };
}

/** A fresh browser that walks an authorization URL as answerConnecting does; the code reaches `callbackUrl`. */
export function connectingBrowser(callbackUrl: string, user: string, githubUser: string, pages: string[] = []) {
  return async (url: URL): Promise<void> => {
    const back = await new HttpBrowser().walk(url.href, callbackUrl, answerConnecting(user, githubUser, pages));
    await fetch(back);
  };
}

/**
 * A fresh browser that signs in as `user` and cancels at the connect step; the URL the broker sent
 * it back to the client with goes to `landed`.
 */
export function cancellingBrowser(callbackUrl: string, user: string, landed: URL[]) {
  const signIn = answerAs(user);
  return async (url: URL): Promise<void> => {
    const back = await new HttpBrowser().walk(url.href, callbackUrl, (at, html) =>
      html.includes('id="connect-heading"') ? { action: "consent", form: { ...hidden(html), decision: "cancel" } } : signIn(at, html),
    );
    landed.push(back);
    await fetch(back);
  };
}
