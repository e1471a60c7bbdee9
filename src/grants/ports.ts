// The two boundaries between the authorization server's HTTP endpoints (oauth/) and the token and
// upstream machinery (grants/): oauth/ validates requests and clients; these do the rest.
import type { IntrospectionResponse, RegisteredClient, TokenResponse } from "./types.ts";

/**
 * Issues, rotates, revokes and describes the broker's own tokens. Every method throws OAuthError
 * (http/errors.ts) with the RFC 6749 §5.2 code on failure. `resource` arguments are already
 * canonical (oauth/resource.ts) or undefined when the client sent none; `scope` is already checked
 * against the supported scopes.
 */
export interface TokenIssuer {
  exchangeAuthorizationCode(input: {
    code: string;
    client: RegisteredClient;
    redirectUri: string | undefined;
    codeVerifier: string | undefined;
    resource: string | undefined;
  }): Promise<TokenResponse>;
  refresh(input: { refreshToken: string; client: RegisteredClient; scope: string | undefined; resource: string | undefined }): Promise<TokenResponse>;
  clientCredentials(input: { client: RegisteredClient; scope: string | undefined; resource: string | undefined }): Promise<TokenResponse>;
  /** RFC 7009: unknown tokens and other clients' tokens are silently ignored. */
  revoke(input: { token: string; client: RegisteredClient; tokenTypeHint: string | undefined }): Promise<void>;
  introspect(input: { token: string; client: RegisteredClient }): Promise<IntrospectionResponse>;
}

/** Sends an approved authorization transaction to the upstream IdP. */
export interface UpstreamLoginStarter {
  /** Display name of the upstream IdP for the consent page ("GitHub", "Google", …). */
  readonly providerName: string;
  /**
   * Prepares the upstream leg of an approved transaction (state, nonce, PKCE verifier stored with
   * it) and returns the upstream authorization URL to redirect the browser to.
   */
  start(transactionId: string): Promise<string>;
}
