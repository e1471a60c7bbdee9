// The README's "Connected accounts" section, as written: the example file it quotes, run with the
// OIDC login it describes against the GitHub emulator (the only change: the GitHub Enterprise
// Server URLs of the emulator, which the example's comment says how to give) — the GitHub MCP
// server receives each user's own GitHub token.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { readFileSync } from "node:fs";
import path from "node:path";
import { connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { startIssuerCatalogue, type IssuerCatalogue } from "../support/issuer-catalogue.ts";
import { connectingBrowser } from "../support/connections.ts";
import { toolText } from "../gateway/harness.ts";
import { projectRoot } from "../../src/project-root.ts";

const example = readFileSync(path.join(projectRoot, "examples/connected-accounts.yaml"), "utf8");
const readme = readFileSync(path.join(projectRoot, "README.md"), "utf8");

let github: GitHubEmulator;
let records: V2McpServer;
let at: IssuerCatalogue;

beforeAll(async () => {
  [github, records] = await Promise.all([startGitHubEmulator({ clientId: "Iv1.readme", clientSecret: "readme-secret" }), startV2McpServer()]);
  const lines = example.trimEnd().split("\n");
  const provider = lines.findIndex((l) => l.trim().startsWith("provider: github"));
  lines.splice(provider + 1, 0, `    url: ${github.url}`, `    apiUrl: ${github.apiUrl}`);
  at = await startIssuerCatalogue({ ada: ["staff"], bo: ["staff"] }, lines, {
    GITHUB_MCP_URL: records.url,
    GITHUB_CONNECTION_CLIENT_ID: "Iv1.readme",
    GITHUB_CONNECTION_SECRET: "readme-secret",
  });
}, 30_000);
afterAll(async () => {
  await at?.close();
  await Promise.all([github?.close(), records?.close()]);
});

describe("the README's connected accounts example (examples/connected-accounts.yaml)", () => {
  it("is what the README quotes, word for word", () => {
    const section = readme.slice(readme.indexOf("## Connected accounts"), readme.indexOf("\n## ", readme.indexOf("## Connected accounts") + 1));
    expect(section).toContain(`\`\`\`yaml\n${example.trimEnd()}\n\`\`\``);
  });

  it("sends each user's own GitHub token to the GitHub MCP server", async () => {
    for (const user of ["ada", "bo"]) {
      const connected = await connectWithOAuth(at.mcpAt("github"), at.callback, connectingBrowser(at.callback.url, user, `${user}-gh`));
      try {
        const before = records.requests.length;
        expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: user } }))).toBe(user);
        for (const r of records.requests.slice(before)) {
          const res = await fetch(`${github.apiUrl}/user`, { headers: { authorization: String(r.headers.authorization) } });
          expect(((await res.json()) as { login: string }).login).toBe(`${user}-gh`);
        }
      } finally {
        await connected.client.close();
      }
    }
  });
});
