// The real MCP TypeScript SDK client doing its real OAuth flow against the broker: discovery from
// the 401, dynamic registration, PKCE, `resource`. The user's part (consent, upstream login) is
// done by `authorize`, which gets the authorization URL and must lead the user agent through it;
// the redirect lands on a loopback callback server here that captures the code.
import type { ClientCapabilities } from "@modelcontextprotocol/sdk/types.js";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError, type OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";

export interface AuthorizationOutcome {
  readonly code?: string;
  readonly error?: string;
  readonly state?: string;
  readonly iss?: string;
}

/** A loopback redirect URI that records what the authorization server sends back. */
export class CallbackServer {
  private server!: http.Server;
  private waiter: ((o: AuthorizationOutcome) => void) | undefined;
  /** Outcomes that arrived before anyone asked, in order. */
  private readonly pending: AuthorizationOutcome[] = [];
  url = "";

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      const url = new URL(req.url ?? "/", this.url);
      // Only the redirect URI counts: a browser's /favicon.ico must not pass for an outcome.
      if (url.pathname !== new URL(this.url).pathname) {
        res.writeHead(404).end();
        return;
      }
      const outcome: AuthorizationOutcome = Object.fromEntries(
        ["code", "error", "state", "iss"].flatMap((k) => (url.searchParams.has(k) ? [[k, url.searchParams.get(k)!]] : [])),
      );
      res.writeHead(200, { "content-type": "text/html" }).end(`<!doctype html><title>Done</title><h1>${outcome.code ? "Signed in" : "Not signed in"}</h1>`);
      const waiter = this.waiter;
      this.waiter = undefined;
      if (waiter) waiter(outcome);
      else this.pending.push(outcome);
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/callback`;
    return this;
  }

  next(timeoutMs = 30_000): Promise<AuthorizationOutcome> {
    const queued = this.pending.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no authorization response reached the callback")), timeoutMs);
      this.waiter = (o) => {
        clearTimeout(timer);
        resolve(o);
      };
    });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }
}

/** An in-memory OAuthClientProvider, as a real MCP client application would keep one per server. */
export class TestOAuthProvider implements OAuthClientProvider {
  clientInfo: OAuthClientInformationMixed | undefined;
  savedTokens: OAuthTokens | undefined;
  private verifier = "";
  readonly authorizationUrls: URL[] = [];
  redirects = 0;

  constructor(
    private readonly callbackUrl: string,
    private readonly authorize: (url: URL) => Promise<void>,
    private readonly name = "SDK e2e client",
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
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.clientInfo = info;
  }
  tokens() {
    return this.savedTokens;
  }
  saveTokens(tokens: OAuthTokens) {
    this.savedTokens = tokens;
  }
  async redirectToAuthorization(url: URL) {
    this.redirects++;
    this.authorizationUrls.push(url);
    await this.authorize(url);
  }
  saveCodeVerifier(v: string) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
  /** What the SDK asked to forget, in order. */
  readonly invalidations: string[] = [];
  /** As real MCP client applications do: forget what the server said is no longer valid. */
  invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery") {
    this.invalidations.push(scope);
    if (scope === "all" || scope === "client") this.clientInfo = undefined;
    if (scope === "all" || scope === "tokens") this.savedTokens = undefined;
    if (scope === "all" || scope === "verifier") this.verifier = "";
  }
}

/**
 * A client application that keeps no refresh tokens. The SDK client (1.x) answers a 403
 * insufficient_scope by refreshing when it holds a refresh token, which can never widen a scope and
 * dead-ends in "Server returned 403 after trying upscoping" (modelcontextprotocol/typescript-sdk#2255,
 * fixed upstream by SEP-2350's refresh bypass, typescript-sdk#2356); without one it authorizes
 * again, as step-up needs.
 */
export class NoRefreshProvider extends TestOAuthProvider {
  override saveTokens(tokens: OAuthTokens) {
    const { refresh_token: _dropped, ...rest } = tokens;
    super.saveTokens(rest);
  }
}

export interface ConnectedClient {
  readonly client: Client;
  readonly transport: StreamableHTTPClientTransport;
  readonly provider: TestOAuthProvider;
}

/**
 * Connects the SDK client to `mcpUrl`, running the OAuth flow when the server answers 401:
 * `authorize` leads the user agent; the code that reaches `callback` finishes the flow.
 */
export async function connectWithOAuth(
  mcpUrl: string,
  callback: CallbackServer,
  authorize: (url: URL) => Promise<void>,
  provider?: TestOAuthProvider,
  /** What the client declares at initialize (e.g. `{ elicitation: { url: {} } }`). */
  capabilities?: ClientCapabilities,
): Promise<ConnectedClient> {
  const p = provider ?? new TestOAuthProvider(callback.url, authorize);
  const first = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: p });
  const client = new Client({ name: "mcp-auth-broker-e2e", version: "1.0.0" }, capabilities ? { capabilities } : undefined);
  try {
    await client.connect(first);
    return { client, transport: first, provider: p };
  } catch (err) {
    if (!(err instanceof UnauthorizedError)) throw err;
  }
  const outcome = await callback.next();
  if (!outcome.code) throw new Error(`authorization failed: ${outcome.error ?? "no code"}`);
  await first.finishAuth(outcome.code);
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: p });
  await client.connect(transport);
  return { client, transport, provider: p };
}

/**
 * Calls `tool`, which the server refuses for want of a scope: the SDK sends the user to authorize
 * the larger scope and throws. When what it threw is UnauthorizedError, the code that reached
 * `callback` finishes that authorization. What the call threw, and that code.
 */
export async function callNeedingStepUp(connected: ConnectedClient, callback: CallbackServer, tool: string): Promise<{ thrown: unknown; code?: string }> {
  let thrown: unknown;
  try {
    await connected.client.callTool({ name: tool, arguments: {} });
  } catch (err) {
    thrown = err;
  }
  if (!(thrown instanceof UnauthorizedError)) return { thrown };
  const { code } = await callback.next();
  if (code) await connected.transport.finishAuth(code);
  return { thrown, code };
}
