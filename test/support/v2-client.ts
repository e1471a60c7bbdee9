// The MCP SDK v2 client (@modelcontextprotocol/client 2.4) in either era, doing its own OAuth flow
// against the broker: discovery from the 401, dynamic registration, PKCE, `resource`, and RFC 9207
// — v2's finishAuth checks `iss`, so it is handed the whole callback query.
import { Client, StreamableHTTPClientTransport, UnauthorizedError, type OAuthClientProvider, type OAuthDiscoveryState } from "@modelcontextprotocol/client";
import type { CallbackServer } from "./mcp-oauth-client.ts";

type Stored<K extends "clientInformation" | "tokens"> = Awaited<ReturnType<OAuthClientProvider[K]>>;

/** The era the client speaks: 2026-07-28 pinned (stateless), or the 2025 handshake (sessions). */
export type Era = "2026-07-28" | "legacy" | "auto";

/** An in-memory provider, as a client application keeps one per server. */
export class V2OAuthProvider implements OAuthClientProvider {
  private info: Stored<"clientInformation">;
  private saved: Stored<"tokens">;
  private verifier = "";
  private discovery: OAuthDiscoveryState | undefined;

  constructor(
    private readonly callbackUrl: string,
    private readonly authorize: (url: URL) => Promise<void>,
  ) {}

  get redirectUrl(): string {
    return this.callbackUrl;
  }
  get clientMetadata() {
    return {
      client_name: "SDK v2 client",
      redirect_uris: [this.callbackUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: NonNullable<Stored<"clientInformation">>) {
    this.info = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: NonNullable<Stored<"tokens">>) {
    this.saved = tokens;
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
  /** The access token the client holds (tests replay requests with it). */
  get accessToken(): string {
    return this.saved?.access_token ?? "";
  }
}

export interface V2Connection {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  readonly provider: V2OAuthProvider;
}

/** What the client declares it can do (e.g. `{ elicitation: { url: {} } }`: URL-mode elicitation). */
export type V2Capabilities = NonNullable<ConstructorParameters<typeof Client>[1]>["capabilities"];

function newClient(era: Era, capabilities?: V2Capabilities): Client {
  const mode = era === "2026-07-28" ? { pin: "2026-07-28" } : era;
  return new Client({ name: "mcp-auth-broker-v2-test", version: "1.0.0" }, { versionNegotiation: { mode }, ...(capabilities ? { capabilities } : {}) });
}

/**
 * Connects in `era`, running the OAuth flow when the broker answers 401: `authorize` leads the user
 * agent; what reaches `callback` finishes the flow. `headers` go on every request.
 */
export async function connectV2WithOAuth(
  mcpUrl: string,
  era: Era,
  callback: CallbackServer,
  authorize: (url: URL) => Promise<void>,
  headers: Record<string, string> = {},
  capabilities?: V2Capabilities,
): Promise<V2Connection> {
  const provider = new V2OAuthProvider(callback.url, authorize);
  const open = () => new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider, requestInit: { headers } });
  const first = open();
  try {
    const client = newClient(era, capabilities);
    await client.connect(first);
    return { client, transport: first, provider };
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  const outcome = await callback.next();
  if (!outcome.code) throw new Error(`authorization failed: ${outcome.error ?? "no code"}`);
  await first.finishAuth(new URLSearchParams(Object.entries(outcome)));
  const transport = open();
  const client = newClient(era, capabilities);
  await client.connect(transport);
  return { client, transport, provider };
}

/** Connects without OAuth (the gateway harness authenticates by test headers). */
export async function connectV2(
  mcpUrl: string,
  era: Era,
  headers: Record<string, string>,
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers } });
  const client = newClient(era);
  await client.connect(transport);
  return { client, transport };
}
