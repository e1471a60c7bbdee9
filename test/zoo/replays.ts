// What real MCP clients send to connect, in one place: how each identifies itself (dynamic
// registration or a Client ID Metadata Document), and the /authorize and /token requests it makes.
// The zoo tests cite the sources beside each client's own checks; every-client.test.ts runs them
// all against brokers in front of each backend.
import { assertionClaims, assertionForm, sign, type SigningKey } from "../support/client-assertion.ts";
import type { DocumentServer } from "../support/document-server.ts";
import { authorize, tokenRequest } from "../support/oauth-flow.ts";

// ---- ChatGPT -------------------------------------------------------------------------------------

/** The id in ChatGPT's document URLs (the one in Altinity/altinity-mcp#118's log). */
export const CHATGPT_CONNECTOR = "kDmjx77UnKOM";
export const CHATGPT_CONNECTOR_CALLBACK = `https://chatgpt.com/connector/oauth/${CHATGPT_CONNECTOR}`;
/** The kid of ChatGPT's published key (engram-app/Engram#1633). */
export const CHATGPT_KID = "cimd-20260428030119";
/** The fixed callback of ChatGPT's dynamically registered connectors. */
export const CHATGPT_DCR_CALLBACK = "https://chatgpt.com/connector_platform_oauth_redirect";

/**
 * ChatGPT's document, field for field, served by the test's https server under the name chatgpt.com
 * (answered by the broker's injected DNS lookup; nothing leaves the machine). The one difference
 * from the real one: the server cannot take port 443, so its URLs carry the test server's port.
 */
export function chatgptDocument(origin: string, id = CHATGPT_CONNECTOR, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    client_id: `${origin}/oauth/${id}/client.json`,
    client_uri: "https://chatgpt.com/",
    redirect_uris: [`https://chatgpt.com/connector/oauth/${id}`],
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    client_name: "ChatGPT",
    token_endpoint_auth_method: "private_key_jwt",
    token_endpoint_auth_methods_supported: ["none", "private_key_jwt"],
    token_endpoint_auth_signing_alg: "RS256",
    jwks_uri: `${origin}/oauth/jwks.json`,
    ...extra,
  };
}

/** ChatGPT's dynamic registration (connectors without a metadata document). */
export const CHATGPT_REGISTRATION = {
  client_name: "ChatGPT",
  redirect_uris: [CHATGPT_DCR_CALLBACK],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
};

// ---- Claude ----------------------------------------------------------------------------------------

/** Claude Code's document as anthropics/claude-code#41011 and #42301 quote it (no application_type, no port), its client_id aside. */
export const CLAUDE_CODE_DOCUMENT: Readonly<Record<string, unknown>> = {
  client_name: "Claude Code",
  client_uri: "https://claude.ai",
  redirect_uris: ["http://localhost/callback", "http://127.0.0.1/callback"],
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
};

/** Claude Code's document served as `clientId`. */
export function claudeCodeDocument(clientId: string): Record<string, unknown> {
  return { client_id: clientId, ...CLAUDE_CODE_DOCUMENT };
}

export const CLAUDE_AI_CALLBACK = "https://claude.ai/api/mcp/auth_callback";
/** claude.ai's registration: modelcontextprotocol/modelcontextprotocol#653, verbatim. */
export const CLAUDE_AI_REGISTRATION = {
  client_name: "claudeai",
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  token_endpoint_auth_method: "none",
  scope: "claudeai",
  redirect_uris: [CLAUDE_AI_CALLBACK],
};

// ---- Editors ---------------------------------------------------------------------------------------

/** VS Code's registration: microsoft/vscode src/vs/base/common/oauth.ts, fetchDynamicRegistration(). */
export function vscodeRegistration(grantTypes: readonly string[]): Record<string, unknown> {
  return {
    client_name: "Visual Studio Code",
    client_uri: "https://code.visualstudio.com",
    grant_types: grantTypes,
    response_types: ["code"],
    redirect_uris: ["https://insiders.vscode.dev/redirect", "https://vscode.dev/redirect", "http://127.0.0.1/", "http://127.0.0.1:33418/"],
    scope: "mcp",
    token_endpoint_auth_method: "none",
    application_type: "native",
  };
}
/** The grant types VS Code asks for, of those the server supports. */
export const VSCODE_WANTED_GRANTS = ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"];

export const CURSOR_APP_CALLBACK = "cursor://anysphere.cursor-mcp/oauth/callback";
/** Cursor's registration: one request, three redirect URIs, the app scheme first. */
export const CURSOR_REGISTRATION = {
  redirect_uris: [CURSOR_APP_CALLBACK, "https://www.cursor.com/agents/mcp/oauth/callback", "http://localhost:8787/callback"],
  token_endpoint_auth_method: "none",
  grant_types: ["authorization_code", "refresh_token"],
  response_types: ["code"],
  client_name: "Cursor",
};

// ---- Connecting ------------------------------------------------------------------------------------

export interface ZooTokens {
  readonly access_token: string;
  readonly refresh_token?: string;
  readonly scope?: string;
}

/** The test's stand-ins for the clients' own hosts: the https document server and ChatGPT's key. */
export interface ZooWorld {
  readonly docs: DocumentServer;
  readonly chatgptKey: SigningKey;
}

export interface ZooClient {
  readonly name: string;
  /** Connects to the broker at `brokerUrl` as `user`, as this client does: its client id and tokens. */
  connect(world: ZooWorld, brokerUrl: string, user: string): Promise<{ clientId: string; tokens: ZooTokens }>;
}

/** POSTs a registration as the client sends it; its client_id. */
export async function registerAs(brokerUrl: string, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${brokerUrl}/register`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) });
  if (res.status !== 201) throw new Error(`registration refused: ${res.status} ${await res.text()}`);
  return ((await res.json()) as { client_id: string }).client_id;
}

interface Flow {
  readonly clientId: string;
  /** Where the authorization request says the code goes (a loopback port of its choosing, an app, a site). */
  readonly redirectUri: string;
  readonly scope?: string;
  /** The client's authentication at /token beyond client_id (an assertion). */
  readonly tokenAuth?: () => Promise<Record<string, string>>;
}

/** /authorize as `user` (consent and login in a browser), then /token with PKCE. */
async function codeFlow(brokerUrl: string, user: string, flow: Flow): Promise<{ clientId: string; tokens: ZooTokens }> {
  const resource = `${brokerUrl}/mcp`;
  const { callback, verifier } = await authorize(
    brokerUrl,
    { client_id: flow.clientId, redirect_uri: flow.redirectUri },
    { user, resource, scope: flow.scope },
  );
  const code = callback.searchParams.get("code");
  if (!code) throw new Error(`no code at ${callback.href}`);
  const token = await tokenRequest(brokerUrl, {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: flow.redirectUri,
    client_id: flow.clientId,
    resource,
    ...(flow.tokenAuth ? await flow.tokenAuth() : {}),
  });
  if (token.status !== 200) throw new Error(`token refused: ${token.status} ${JSON.stringify(token.body)}`);
  return { clientId: flow.clientId, tokens: token.body as unknown as ZooTokens };
}

const chatgptId = (world: ZooWorld) => `https://chatgpt.com:${world.docs.port}/oauth/${CHATGPT_CONNECTOR}/client.json`;
const claudeCodeId = (world: ZooWorld) => `https://claude.ai:${world.docs.port}/oauth/claude-code-client-metadata`;

/** Every client of the zoo, connecting as it does. */
export const ZOO: readonly ZooClient[] = [
  {
    name: "ChatGPT (metadata document, private_key_jwt)",
    connect: (world, broker, user) =>
      codeFlow(broker, user, {
        clientId: chatgptId(world),
        redirectUri: CHATGPT_CONNECTOR_CALLBACK,
        scope: "mcp offline_access",
        tokenAuth: async () => assertionForm(await sign(world.chatgptKey, assertionClaims(chatgptId(world), `${broker}/token`))),
      }),
  },
  {
    name: "ChatGPT (dynamic registration)",
    connect: async (_world, broker, user) =>
      codeFlow(broker, user, { clientId: await registerAs(broker, CHATGPT_REGISTRATION), redirectUri: CHATGPT_DCR_CALLBACK, scope: "mcp offline_access" }),
  },
  {
    name: "Claude Code (metadata document, ephemeral loopback port)",
    connect: (world, broker, user) => codeFlow(broker, user, { clientId: claudeCodeId(world), redirectUri: "http://localhost:58135/callback" }),
  },
  {
    name: "claude.ai (dynamic registration, scope claudeai)",
    connect: async (_world, broker, user) =>
      codeFlow(broker, user, { clientId: await registerAs(broker, CLAUDE_AI_REGISTRATION), redirectUri: CLAUDE_AI_CALLBACK }),
  },
  {
    name: "VS Code (dynamic registration, another loopback port)",
    connect: async (_world, broker, user) =>
      codeFlow(broker, user, {
        clientId: await registerAs(broker, vscodeRegistration(["authorization_code", "refresh_token"])),
        redirectUri: "http://127.0.0.1:59656/",
      }),
  },
  {
    name: "Cursor (dynamic registration, cursor:// app scheme)",
    connect: async (_world, broker, user) =>
      codeFlow(broker, user, { clientId: await registerAs(broker, CURSOR_REGISTRATION), redirectUri: CURSOR_APP_CALLBACK }),
  },
];

/** Serves the documents and key sets of the zoo's metadata-document clients on `world.docs`. */
export function publishZooDocuments(world: ZooWorld, jwks: unknown): void {
  world.docs.json(`/oauth/${CHATGPT_CONNECTOR}/client.json`, chatgptDocument(`https://chatgpt.com:${world.docs.port}`));
  world.docs.json("/oauth/jwks.json", jwks, { "cache-control": "public, max-age=3600" });
  world.docs.json("/oauth/claude-code-client-metadata", claudeCodeDocument(claudeCodeId(world)), { "cache-control": "public, max-age=3600" });
}
