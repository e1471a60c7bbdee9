// What the connected-apps page (/account) uses: the grants services it calls and the names it shows.
import type { AccountSignIn } from "../grants/account-sign-in.ts";
import type { BrowserIdentities } from "../grants/browser-identities.ts";
import type { ConnectedApps } from "../grants/connected-apps.ts";
import type { ConnectFlow } from "../grants/connect-flow.ts";
import type { Connections } from "../grants/connections.ts";

/** Connected accounts: the flow that connects one and the store of the connections made. */
export interface AccountConnectDeps {
  readonly flow: ConnectFlow;
  readonly connections: Connections;
}

export interface AccountDeps {
  /** PUBLIC_URL: redirects go to PUBLIC_URL/account. */
  readonly publicUrl: string;
  readonly resourceName: string;
  /** The upstream IdP's display name ("GitHub"). */
  readonly providerName: string;
  readonly browserIdentities: BrowserIdentities;
  readonly signIn: AccountSignIn;
  readonly apps: ConnectedApps;
  /** Connected accounts (a configuration with `connections`). */
  readonly connect?: AccountConnectDeps | undefined;
}

/** PUBLIC_URL/account, with a notice for the page to show. */
export function accountUrl(publicUrl: string, query: Record<string, string> = {}): string {
  const search = new URLSearchParams(query).toString();
  return `${publicUrl}/account${search ? `?${search}` : ""}`;
}
