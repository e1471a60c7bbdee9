// The README's "Several MCP servers" example, started exactly as written (examples/broker.yaml),
// with stand-ins for what it points at: the GitHub emulator as the login, two demo MCP servers for
// the GitHub and docs servers, the stdio fixture for the notes server. What the README promises of
// it: each server at PUBLIC_URL/mcp/<name> (docs also at /mcp), the GitHub server receiving each
// user's own GitHub token, the docs rules (anything needs docs:read), and the notes server for the
// platform team alone.
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { authorize, obtainTokens, registerClient } from "../support/oauth-flow.ts";
import { HttpBrowser } from "../support/http-browser.ts";
import { INITIALIZE_MESSAGE, mcpPostTo } from "../support/mcp-probe.ts";
import { projectRoot } from "../support/spawn.ts";
import { fixtureCommand } from "../stdio/stdio-support.ts";

let gh: GitHubEmulator;
let githubMcp: DemoMcpServer;
let docsMcp: DemoMcpServer;
let t: TestBroker;

const at = (name: string) => `${t.url}/mcp/${name}`;
const callTool = (url: string, token: string, name: string, session: string) =>
  mcpPostTo(
    url,
    token,
    { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name, arguments: { message: "hi" } } },
    { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
  );

beforeAll(async () => {
  gh = await startGitHubEmulator({ clientId: "Iv1.readme", clientSecret: "readme-secret" });
  gh.addOrgMember("acme", "octocat");
  gh.addTeamMember("acme", "platform", "hubot");
  [githubMcp, docsMcp] = await Promise.all([startDemoMcpServer(), startDemoMcpServer()]);
  t = await startBroker({
    ...gh.brokerEnv(),
    ALLOWED_GITHUB_ORGS: "acme",
    UPSTREAM_SCOPES: "read:user user:email repo",
    BROKER_CONFIG: path.join(projectRoot, "examples/broker.yaml"),
    GITHUB_MCP_URL: githubMcp.url,
    DOCS_MCP_URL: docsMcp.url,
    NOTES_MCP_COMMAND: fixtureCommand,
  });
});
afterAll(async () => {
  await t?.stop();
  await githubMcp?.close();
  await docsMcp?.close();
  await gh?.close();
});

/** An initialized session at `url` with a token for it: the token and the session id. */
async function session(url: string, user: string, scope?: string): Promise<{ token: string; id: string }> {
  const client = await registerClient(t.url);
  const { tokens } = await obtainTokens(t.url, { user, client, resource: url, ...(scope ? { scope } : {}) });
  const res = await mcpPostTo(url, tokens.access_token, INITIALIZE_MESSAGE);
  expect(res.status).toBe(200);
  return { token: tokens.access_token, id: res.headers.get("mcp-session-id")! };
}

describe("the README's examples/broker.yaml", () => {
  it("serves each server at its own path, and docs at /mcp too", async () => {
    for (const [name, title] of [
      ["github", "GitHub"],
      ["docs", "Team docs"],
      ["notes", "Notes"],
    ] as const) {
      const prm = (await (await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp/${name}`)).json()) as Record<string, unknown>;
      expect(prm).toMatchObject({ resource: at(name), resource_name: title });
    }
    const atMcp = (await (await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    expect(atMcp).toMatchObject({ resource: `${t.url}/mcp`, resource_name: "Team docs" });
  });

  it("gives the GitHub server each user's own GitHub token, and nobody's at the docs server", async () => {
    const { token, id } = await session(at("github"), "octocat");
    expect((await callTool(at("github"), token, "echo", id)).status).toBe(200);
    const forwarded = githubMcp.requests.filter((r) => r.headers["x-auth-user"] === "octocat").map((r) => r.headers["x-upstream-access-token"]);
    expect(forwarded.length).toBeGreaterThan(0);
    expect(new Set(forwarded).size).toBe(1);
    expect(forwarded[0]).toMatch(/^gh[ou]_/);
    expect(docsMcp.requests.some((r) => r.headers["x-upstream-access-token"] !== undefined)).toBe(false);
  });

  it("asks for docs:read before any docs tool (its catch-all rule), and calls it once granted", async () => {
    const without = await session(at("docs"), "octocat", "mcp");
    const refused = await callTool(at("docs"), without.token, "echo", without.id);
    expect(refused.status).toBe(403);
    expect(refused.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
    expect(refused.headers.get("www-authenticate")).toContain("docs:read");
    const granted = await session(at("docs"), "octocat", "docs:read");
    expect((await callTool(at("docs"), granted.token, "echo", granted.id)).status).toBe(200);
  });

  it("lets only the platform team sign in for the notes server", async () => {
    const client = await registerClient(t.url);
    const browser = new HttpBrowser();
    const { callback } = await authorize(t.url, client, { user: "octocat", browser, resource: at("notes"), stopAt: `${t.url}/oauth/callback` });
    expect((await browser.request(callback.href)).status).toBe(403);
    const { id } = await session(at("notes"), "hubot");
    expect(id).toBeTruthy();
  });
});
