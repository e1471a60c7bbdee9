// The MCP SDK v2 client (`@modelcontextprotocol/client` 2.4) doing its real OAuth flow against the
// broker, as mcp-oauth-client.ts does for v1: discovery from the 401, dynamic registration, PKCE,
// `resource`; the user's part is done by `authorize`. v2 validates the authorization response's
// `iss` (RFC 9207, required by MCP 2026-07-28 when present), so finishAuth gets the whole callback
// query. `versionNegotiation` chooses the era: `{ pin: "2026-07-28" }` speaks only the stateless
// revision, `"auto"` probes with server/discover and falls back to initialize.
import {
  Client,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  type VersionNegotiationMode,
} from "@modelcontextprotocol/client";
import type { CallbackServer } from "./mcp-oauth-client.ts";

/** An in-memory v2 OAuthClientProvider, one per server as a client application keeps it. */
export class V2OAuthProvider implements OAuthClientProvider {
  clientInfo: StoredOAuthClientInformation | undefined;
  savedTokens: StoredOAuthTokens | undefined;
  private verifier = "";
  private discovery: OAuthDiscoveryState | undefined;

  constructor(
    private readonly callbackUrl: string,
    private readonly authorize: (url: URL) => Promise<void>,
    private readonly name = "SDK v2 e2e client",
  ) {}

  get redirectUrl(): string {
    return this.callbackUrl;
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.callbackUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }

  clientInformation() {
    return this.clientInfo;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.clientInfo = info;
  }
  tokens() {
    return this.savedTokens;
  }
  saveTokens(tokens: StoredOAuthTokens) {
    this.savedTokens = tokens;
  }
  async redirectToAuthorization(url: URL) {
    await this.authorize(url);
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  /** Kept with the verifier, as v2 asks, so that the callback is checked against the same server. */
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

export interface V2ConnectedClient {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  readonly provider: V2OAuthProvider;
}

/** Connects the v2 client to `mcpUrl`, running the OAuth flow when the server answers 401. */
export async function connectV2WithOAuth(
  mcpUrl: string,
  callback: CallbackServer,
  authorize: (url: URL) => Promise<void>,
  mode: VersionNegotiationMode,
): Promise<V2ConnectedClient> {
  const provider = new V2OAuthProvider(callback.url, authorize);
  const client = () => new Client({ name: "mcp-auth-broker-e2e-v2", version: "1.0.0" }, { versionNegotiation: { mode } });
  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  try {
    const c = client();
    await c.connect(first);
    return { client: c, transport: first, provider };
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  const outcome = await callback.next();
  if (!outcome.code) throw new Error(`authorization failed: ${outcome.error ?? "no code"}`);
  await first.finishAuth(new URLSearchParams(Object.entries(outcome).filter((e): e is [string, string] => e[1] !== undefined)));
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
  const c = client();
  await c.connect(transport);
  return { client: c, transport, provider };
}
