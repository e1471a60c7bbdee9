// The two boundaries between the authorization server's HTTP endpoints (oauth/) and the token and
// upstream machinery (grants/): oauth/ reads requests and client credentials; these parse what
// they accept and do the rest.
import type { KnownClient } from "./clients.ts";
import type { ExchangedTokenResponse, FormParameters, IntrospectionResponse, RegisteredClient, TokenResponse } from "./types.ts";

/**
 * The client a token request names, not yet authenticated: the credentials it carries (HTTP Basic,
 * client_secret_post, a client assertion, or client_id alone), checked against the client's row
 * when grants/ hands that row over (client-authentication.ts). A refresh reads the row with its
 * token, in one statement.
 */
export interface PresentedClient {
  readonly clientId: string;
  /** The client when the credentials fit `known` (null: no such client); else rejects with InvalidClient. */
  authenticate(known: KnownClient | null): Promise<RegisteredClient>;
}

/**
 * Issues, rotates, revokes and describes the broker's own tokens. oauth/ reads the form and the
 * client's credentials (and authenticates the client of /revoke and /introspect itself); each
 * method parses the parameters it accepts itself and throws the domain errors of grants/errors.ts
 * (RFC 6749 §5.2 codes) on failure.
 */
export interface TokenIssuer {
  /** POST /token: authenticates the client, then the grant named by grant_type, if the client is registered for it. */
  grant(client: PresentedClient, params: FormParameters): Promise<TokenResponse | ExchangedTokenResponse>;
  /** RFC 7009: unknown tokens and other clients' tokens are silently ignored. */
  revoke(client: RegisteredClient, params: FormParameters): Promise<void>;
  /** RFC 7662, for the client the token was issued to (any other learns "inactive"). */
  introspect(client: RegisteredClient, params: FormParameters): Promise<IntrospectionResponse>;
}

/** Sends an approved authorization transaction to the upstream IdP. */
export interface UpstreamLoginStarter {
  /** Display name of the upstream IdP for the consent page ("GitHub", "Google", …). */
  readonly providerName: string;
  /**
   * Prepares the upstream leg of an approved transaction (state, nonce, PKCE verifier stored with
   * it) and returns the upstream authorization URL to redirect the browser to.
   */
  start(transactionId: string, options?: { readonly selectAccount?: boolean }): Promise<string>;
}
