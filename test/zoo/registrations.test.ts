// The redirect URIs real MCP clients register, replayed at /register: the rule that refuses
// browsers' schemes, URL wrappers, user names and non-canonical loopback hosts must refuse none of
// them. Each entry names where its URIs come from. Public clients (token_endpoint_auth_method none)
// as every one of them registers; ALLOW_APP_SCHEME_REDIRECTS at its default (true).
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import { freshIp, postJson } from "../support/oauth-client.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";

const CLIENTS: ReadonlyArray<readonly [client: string, source: string, redirectUris: readonly string[]]> = [
  [
    "Cursor",
    "the body erp-mafia/accounted#2225 quotes; the app scheme is the one Cursor's MCP docs name (makeplane/plane-mcp-server#159)",
    ["cursor://anysphere.cursor-mcp/oauth/callback", "https://www.cursor.com/agents/mcp/oauth/callback", "http://localhost:8787/callback"],
  ],
  ["Cursor, earlier releases", "the per-server callback MCP servers' allowlists quote", ["cursor://anysphere.cursor-retrieval/oauth/user-acme/callback"]],
  [
    "VS Code",
    "microsoft/vscode src/vs/base/common/oauth.ts fetchDynamicRegistration",
    [
      "https://insiders.vscode.dev/redirect",
      "https://vscode.dev/redirect",
      "http://localhost/",
      "http://127.0.0.1/",
      "http://localhost:33418/",
      "http://127.0.0.1:33418/",
    ],
  ],
  [
    "VS Code, earlier releases",
    "the same function before the trailing slashes",
    [
      "https://insiders.vscode.dev/redirect",
      "https://vscode.dev/redirect",
      "http://localhost",
      "http://127.0.0.1",
      "http://localhost:33418",
      "http://127.0.0.1:33418",
    ],
  ],
  ["Claude Code (its metadata document)", "anthropics/claude-code#41011, #42301", ["http://localhost/callback", "http://127.0.0.1/callback"]],
  ["Claude Code (dynamic registration, callbackPort)", "anthropics/claude-code#58595", ["http://localhost:49152/callback"]],
  [
    "claude.ai and Claude Desktop",
    "modelcontextprotocol/modelcontextprotocol#653",
    ["https://claude.ai/api/mcp/auth_callback", "https://claude.com/api/mcp/auth_callback"],
  ],
  ["ChatGPT", "OpenAI's connector callback (test/zoo/chatgpt.test.ts)", ["https://chatgpt.com/connector_platform_oauth_redirect"]],
  [
    "Cline in VS Code, Cursor and Windsurf, and standalone",
    "cline/cline src/services/mcp/McpOAuthRedirectResolver.ts (`<the editor's uriScheme>://saoudrizwan.claude-dev/mcp-auth/callback/<hash>`)",
    [
      "vscode://saoudrizwan.claude-dev/mcp-auth/callback/abc123hash",
      "cursor://saoudrizwan.claude-dev/mcp-auth/callback/abc123hash",
      "windsurf://saoudrizwan.claude-dev/mcp-auth/callback/abc123hash",
      "http://127.0.0.1:48801/mcp-auth/callback/abc123hash",
    ],
  ],
  ["Zed", "zed-industries/zed crates/context_server (OAuthCallback::URI)", ["zed://mcp/oauth/callback"]],
  ["Goose", "block/goose crates/goose/src/oauth/mod.rs", ["http://127.0.0.1:51234/oauth_callback"]],
  ["opencode", "anomalyco/opencode#5940 (its default callback)", ["http://127.0.0.1:19876/mcp/oauth/callback"]],
  ["Codex CLI", "openai/codex#30460", ["http://127.0.0.1:33418/callback/q1w2e3r4t5y6"]],
  [
    "MCP Inspector",
    "modelcontextprotocol/inspector client/src/lib/auth.ts (window origin + /oauth/callback, /oauth/callback/debug)",
    ["http://localhost:6274/oauth/callback", "http://localhost:6274/oauth/callback/debug"],
  ],
  ["A native app in RFC 8252's own shape", "RFC 8252 §7.1", ["com.example.app:/oauth2redirect/example-provider"]],
];

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker({ TRUST_PROXY: "true" });
});
afterAll(async () => t.stop());

it.each(CLIENTS)("%s registers as it does (%s)", async (client, _source, redirectUris) => {
  const res = await postJson(
    `${t.url}/register`,
    {
      client_name: client,
      redirect_uris: redirectUris,
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    },
    { "x-forwarded-for": freshIp() },
  );
  expect({ status: res.status, body: res.json }).toMatchObject({ status: 201, body: { redirect_uris: redirectUris } });
});
