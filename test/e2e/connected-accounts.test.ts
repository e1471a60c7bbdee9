// Connected accounts in a real browser: the MCP SDK client authorizes at a server that needs the
// user's GitHub account while the user signs in at the company's OIDC issuer; headless Chromium
// walks consent → sign-in → connect step → GitHub → connect step (Continue) → the client.
import { afterAll, beforeAll, expect, it } from "@jest/globals";
import type { BrowserContext } from "playwright-core";
import { authorizeInBrowser, describeWithChromium, newUser, useChromium, type ClickThroughResult } from "../support/browser.ts";
import { connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { startConnectedAccounts, type ConnectedAccounts } from "../support/connections.ts";
import { toolText } from "../gateway/harness.ts";

const chromium = useChromium();

describeWithChromium("connecting a GitHub account in Chromium during the authorization", () => {
  let records: V2McpServer;
  let world: ConnectedAccounts;
  let context: BrowserContext;
  let connected: ConnectedClient;
  let runs: ClickThroughResult[];

  beforeAll(async () => {
    records = await startV2McpServer();
    world = await startConnectedAccounts({ ada: ["staff"] }, ["  - name: code", "    title: Code search", `    url: ${records.url}`, "    connection: github"]);
    chromium.cleanup(async () => {
      await world.close();
      await records.close();
    });
    context = await newUser(chromium.browser);
    const agent = authorizeInBrowser(context, { user: "ada", upstream: "demo", connectGitHubAs: "ada-gh", name: "connected-accounts" });
    runs = agent.runs;
    connected = await connectWithOAuth(world.at.mcpAt("code"), world.at.callback, agent.authorize);
  }, 60_000);
  afterAll(async () => {
    await connected?.client.close();
    await context?.close();
  });

  it("walks consent → sign-in → connect → GitHub → continue, and no code before the account is connected", () => {
    const pages = runs[0]!.pages;
    expect(pages.map((p) => p.kind)).toEqual(["consent", "demo-login", "connect-step", "github-login", "connect-step", "callback"]);
    expect(pages[2]!.text).toContain("Connect your GitHub account");
    expect(pages[2]!.text).toContain("needed by Code search");
    expect(pages[2]!.text).not.toContain("Continue to");
    expect(pages[4]!.text).toContain("connected as ada-gh");
    // Only the last page is the client's: the code arrived after the connection existed.
    expect(pages.filter((p) => p.kind === "callback")).toHaveLength(1);
  });

  it("then sends the user's own GitHub token with every request", async () => {
    const before = records.requests.length;
    expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "hello" } }))).toBe("hello");
    const seen = records.requests.slice(before);
    expect(seen.length).toBeGreaterThan(0);
    for (const r of seen) {
      const res = await fetch(`${world.github.apiUrl}/user`, { headers: { authorization: String(r.headers.authorization) } });
      expect(((await res.json()) as { login: string }).login).toBe("ada-gh");
    }
  });
});
