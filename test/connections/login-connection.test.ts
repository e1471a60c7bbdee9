// A connection to the service the users sign in at: with a GitHub login, a server that needs
// GitHub with scopes the login already holds gets the login's own token and nobody is asked to
// connect again; one that needs more (repo) asks for its own connection, and gets that token.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { catalogueFile } from "../support/catalogue.ts";
import { CallbackServer } from "../support/mcp-oauth-client.ts";
import { connectingBrowser } from "../support/connections.ts";
import { toolText } from "../gateway/harness.ts";

let github: GitHubEmulator;
let records: V2McpServer;
let broker: TestBroker;
let callback: CallbackServer;
let remove: () => void;

beforeAll(async () => {
  [github, records, callback] = await Promise.all([
    startGitHubEmulator({ clientId: "Iv1.login", clientSecret: "login-secret" }),
    startV2McpServer(),
    new CallbackServer().start(),
  ]);
  const file = catalogueFile([
    "servers:",
    "  - name: profile",
    `    url: ${records.url}`,
    "    connection: github-read",
    "  - name: repos",
    `    url: ${records.url}`,
    "    connection: github-repo",
    "connections:",
    // The login's own app and scopes: the login's token serves.
    `  github-read: { provider: github, url: ${github.url}, apiUrl: ${github.apiUrl}, clientId: Iv1.login, clientSecret: login-secret, scopes: [read:user] }`,
    // More than the login holds: a connection of its own.
    `  github-repo: { provider: github, url: ${github.url}, apiUrl: ${github.apiUrl}, clientId: Iv1.login, clientSecret: login-secret, scopes: [repo] }`,
  ]);
  remove = file.remove;
  broker = await startBroker({ ...github.brokerEnv(), ALLOW_ANY_USER: "true", BROKER_CONFIG: file.file });
}, 30_000);
afterAll(async () => {
  await broker?.stop();
  await Promise.all([github?.close(), records?.close(), callback?.close()]);
  remove?.();
});

/** Who a GitHub token belongs to. */
async function loginOf(authorization: string): Promise<string> {
  const res = await fetch(`${github.apiUrl}/user`, { headers: { authorization } });
  return ((await res.json()) as { login: string }).login;
}

async function loginToken(): Promise<string> {
  const session = await broker.broker.database.db.upstreamSession.findFirstOrThrow({ where: { subject: "github:583231" }, orderBy: { createdAt: "desc" } });
  return broker.broker.services.secrets.decrypt(session.accessTokenEnc);
}

describe("a connection to the service the users sign in at", () => {
  it("uses the login's token when its scopes suffice: no connect step", async () => {
    const pages: string[] = [];
    const connected = await connectWithOAuth(`${broker.url}/mcp/profile`, callback, connectingBrowser(callback.url, "octocat", "octocat", pages));
    try {
      expect(pages.some((p) => p.includes('id="connect-heading"'))).toBe(false);
      const before = records.requests.length;
      expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "hi" } }))).toBe("hi");
      const login = await loginToken();
      for (const r of records.requests.slice(before)) expect(r.headers.authorization).toBe(`Bearer ${login}`);
      expect(await broker.broker.database.db.connection.count()).toBe(0);
    } finally {
      await connected.client.close();
    }
  });

  it("asks for a connection of its own when the server needs more than the login holds", async () => {
    const pages: string[] = [];
    const connected = await connectWithOAuth(`${broker.url}/mcp/repos`, callback, connectingBrowser(callback.url, "octocat", "octocat", pages));
    try {
      expect(pages.some((p) => p.includes("Connect your GitHub account"))).toBe(true);
      const before = records.requests.length;
      await connected.client.callTool({ name: "echo", arguments: { message: "hi" } });
      // The connection's own token (granted repo), not the login's.
      const row = await broker.broker.database.db.connection.findUniqueOrThrow({ where: { subject_name: { subject: "github:583231", name: "github-repo" } } });
      expect(row.scope?.split(/[ ,]+/)).toContain("repo");
      const own = await broker.broker.services.secrets.decrypt(row.accessTokenEnc);
      expect(own).not.toBe(await loginToken());
      for (const r of records.requests.slice(before)) {
        expect(r.headers.authorization).toBe(`Bearer ${own}`);
        expect(await loginOf(String(r.headers.authorization))).toBe("octocat");
      }
    } finally {
      await connected.client.close();
    }
  });
});
