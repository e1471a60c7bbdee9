// A broker whose users sign in at a real OIDC issuer (the demo IdP run standalone) with the groups
// a test gives them, serving the catalogue of a configuration file: what a team with its own SSO
// and several MCP servers runs.
import { randomUUID } from "node:crypto";
import { startBroker, type TestBroker } from "./start-broker.ts";
import { catalogueFile } from "./catalogue.ts";
import { CallbackServer } from "./mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "./http-browser.ts";
import { startDemoIdentityProvider, type StandaloneDemoIdentityProvider } from "../../src/demo/identity-provider.ts";

export interface IssuerCatalogue {
  readonly broker: TestBroker;
  readonly callback: CallbackServer;
  /** PUBLIC_URL/mcp/<name>. */
  mcpAt(name: string): string;
  /** `user` signs in at the issuer (a fresh browser) and consents; the code reaches the callback. */
  signInAs(user: string): (url: URL) => Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts the issuer (accounts in `groups`, the global policy admitting the `staff` group) and a
 * broker serving `catalogueLines` (the YAML file, line by line).
 */
export async function startIssuerCatalogue(
  groups: Record<string, string[]>,
  catalogueLines: string[],
  env: Record<string, string> = {},
): Promise<IssuerCatalogue> {
  const [idp, callback]: [StandaloneDemoIdentityProvider, CallbackServer] = await Promise.all([
    startDemoIdentityProvider({ clients: [], cookieKeys: [randomUUID()], accountClaims: (id) => ({ groups: groups[id] ?? [] }) }),
    new CallbackServer().start(),
  ]);
  const { file, remove } = catalogueFile(catalogueLines);
  const clientId = `broker-${randomUUID()}`;
  const broker = await startBroker({
    BROKER_CONFIG: file,
    UPSTREAM_PROVIDER: "oidc",
    UPSTREAM_ISSUER: idp.url,
    UPSTREAM_CLIENT_ID: clientId,
    UPSTREAM_CLIENT_SECRET: "issuer-secret",
    UPSTREAM_SCOPES: "openid email profile groups",
    ALLOWED_GROUPS: "staff",
    ...env,
  });
  await idp.addClient({ client_id: clientId, client_secret: "issuer-secret", redirect_uris: [`${broker.url}/oauth/callback`] });
  return {
    broker,
    callback,
    mcpAt: (name) => `${broker.url}/mcp/${name}`,
    signInAs: (user) => async (url) => {
      const back = await new HttpBrowser().walk(url.href, callback.url, answerAs(user));
      await fetch(back);
    },
    async close() {
      await broker.stop();
      await Promise.all([callback.close(), idp.close()]);
      remove();
    },
  };
}
