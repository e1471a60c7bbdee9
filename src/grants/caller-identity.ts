// The caller of /mcp as validation establishes it and the bearer middleware hands it to the
// backends (and the request log): what the MCP server is told.
import type { IdentityFacts } from "./policy.ts";

export interface CallerIdentity {
  /** Stable user id at the upstream IdP (`github:12345`); null for client_credentials grants. */
  readonly subject: string | null;
  /** Display login or e-mail; null when there is no user. */
  readonly user: string | null;
  /** The MCP client's id at the broker. */
  readonly clientId: string;
  readonly scopes: readonly string[];
  readonly grantId: string;
  /**
   * What access rules (per server, per tool) read about the caller, as of the last upstream check:
   * login, verified e-mails, groups, memberships (undefined: not known). A machine client: its subject.
   */
  readonly facts: IdentityFacts;
  /** The upstream IdP access token; only set when it is passed on (FORWARD_UPSTREAM_TOKEN, MCP_SERVER_TOKEN_ENV). */
  readonly upstreamAccessToken?: string | undefined;
  /** The connected account the server needs (connected accounts): the user's token there, or why it lacks. */
  readonly connection?: CallerConnection | undefined;
}

/** The user's token for the connection a server names, or why there is none (the client is told how to fix it). */
export type CallerConnection =
  | { readonly name: string; readonly token: string; readonly missing?: undefined }
  | { readonly name: string; readonly token: undefined; readonly missing: "not_connected" | "revoked" };
