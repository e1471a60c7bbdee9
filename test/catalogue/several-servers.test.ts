// One broker in front of four MCP servers (three Streamable HTTP, one of them for alice alone, one stdio) from a configuration
// file: each is its own protected resource. The real SDK client connects to one through its OAuth
// flow; a token for one server is refused at the others before anything reaches them; the refresh
// grant keeps the audience; consent is asked per server; each server's metadata names it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { brokerCliEnv, runCliCaptured } from "../support/cli-in-process.ts";
import { AccountVisitor } from "../account/account-visitor.ts";
import { CallbackServer, connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { HttpBrowser, answerAs } from "../support/http-browser.ts";
import { authorizeUrl } from "../support/oauth-client.ts";
import { authorize, obtainTokens, registerClient, tokenRequest } from "../support/oauth-flow.ts";
import { fixtureCommand } from "../stdio/stdio-support.ts";
import { mcpPostTo, INITIALIZE_MESSAGE } from "../support/mcp-probe.ts";
import { catalogueFile } from "../support/catalogue.ts";

let alpha: DemoMcpServer;
let beta: DemoMcpServer;
let t: TestBroker;
let callback: CallbackServer;

const mcpAt = (name: string) => `${t.url}/mcp/${name}`;

const initialize = (url: string, token: string) => mcpPostTo(url, token, INITIALIZE_MESSAGE);
let config: ReturnType<typeof catalogueFile> | undefined;
let file: string;

beforeAll(async () => {
  [alpha, beta] = await Promise.all([startDemoMcpServer(), startDemoMcpServer()]);
  callback = await new CallbackServer().start();
  config = catalogueFile([
    "servers:",
    "  - name: alpha",
    "    title: Alpha docs",
    "    description: The first team's documents",
    `    url: ${alpha.url}`,
    "  - name: beta",
    "    title: Beta tracker",
    `    url: ${beta.url}`,
    "  - name: tools",
    "    title: Local tools",
    `    command: ${JSON.stringify(fixtureCommand)}`,
    "  - name: private",
    "    title: Private notes",
    `    url: ${beta.url}`,
    "    access: { users: [alice] }",
  ]);
  file = config.file;
  t = await startBroker({ BROKER_CONFIG: file });
});
afterAll(async () => {
  await t?.stop();
  await callback?.close();
  await alpha?.close();
  await beta?.close();
  config?.remove();
});

describe("a catalogue of four servers", () => {
  it("publishes each server's protected resource metadata under its own path, naming it", async () => {
    for (const [name, title] of [
      ["alpha", "Alpha docs"],
      ["beta", "Beta tracker"],
      ["tools", "Local tools"],
    ] as const) {
      const res = await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp/${name}`);
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ resource: mcpAt(name), resource_name: title, authorization_servers: [t.url] });
    }
    // No default server: nothing answers at /mcp, and a 401 at a server points at its own metadata.
    expect((await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp`)).status).toBe(404);
    const challenge = (await fetch(mcpAt("beta"), { method: "POST" })).headers.get("www-authenticate");
    expect(challenge).toContain(`resource_metadata="${t.url}/.well-known/oauth-protected-resource/mcp/beta"`);
  });

  it("lets the SDK client connect to one server through OAuth and call its tool; the other server hears nothing", async () => {
    const browser = new HttpBrowser();
    const answer = answerAs("alice");
    const userAuthorizes = async (url: URL) => {
      await browser.walk(url.href, callback.url, answer).then((landing) => fetch(landing));
    };
    const betaBefore = beta.requests.length;
    const connected = await connectWithOAuth(mcpAt("alpha"), callback, userAuthorizes);
    try {
      const result = await connected.client.callTool({ name: "echo", arguments: { message: "hello alpha" } });
      expect(JSON.stringify(result.content)).toContain("hello alpha");
    } finally {
      await connected.client.close();
    }
    const seen = alpha.requests.filter((r) => r.headers["x-auth-user"] === "alice");
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((r) => r.headers["x-auth-server"] === "alpha")).toBe(true);
    expect(beta.requests.length).toBe(betaBefore);
  });

  it("refuses a token issued for one server at every other one, before anything is forwarded", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "bob", resource: mcpAt("alpha") });
    expect((await initialize(mcpAt("alpha"), tokens.access_token)).status).toBe(200);
    const betaBefore = beta.requests.length;
    for (const other of ["beta", "tools"]) {
      const res = await initialize(mcpAt(other), tokens.access_token);
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
    }
    expect(beta.requests.length).toBe(betaBefore);
  });

  it("keeps the audience through the refresh grant: a refresh cannot move a grant to another server", async () => {
    const { client, tokens } = await obtainTokens(t.url, { user: "carol", resource: mcpAt("beta") });
    const moved = await tokenRequest(t.url, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: client.client_id,
      resource: mcpAt("alpha"),
    });
    expect(moved.status).toBe(400);
    expect(moved.body).toMatchObject({ error: "invalid_target" });
    const kept = await tokenRequest(t.url, { grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id: client.client_id });
    expect(kept.status).toBe(200);
    const access = (kept.body as { access_token: string }).access_token;
    expect((await initialize(mcpAt("beta"), access)).status).toBe(200);
    expect((await initialize(mcpAt("alpha"), access)).status).toBe(401);
  });

  it("runs the stdio server for its own tokens", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "dave", resource: mcpAt("tools") });
    const res = await initialize(mcpAt("tools"), tokens.access_token);
    expect(res.status).toBe(200);
    expect(res.headers.get("mcp-session-id")).toBeTruthy();
  });

  it("asks consent per server: an approval for one server does not let a client into another", async () => {
    const client = await registerClient(t.url);
    const browser = new HttpBrowser();
    const first = await authorize(t.url, client, { user: "erin", resource: mcpAt("alpha"), browser });
    expect(first.callback.searchParams.get("code")).toBeTruthy();
    // The same browser and client, for another server: the consent page again, naming that server.
    const again = await browser.request(authorizeUrl(t.url, client, { resource: mcpAt("beta") }).href);
    expect(again.status).toBe(302);
    const location = again.headers.get("location") ?? "";
    expect(location).toContain("/consent?");
    const page = await (await browser.request(new URL(location, t.url).href)).text();
    expect(page).toContain("Beta tracker");
  });

  it("refuses an authorization without a resource: with several servers and no default there is no server to assume", async () => {
    const client = await registerClient(t.url);
    const res = await fetch(authorizeUrl(t.url, client, { resource: undefined }), { redirect: "manual" });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("several MCP servers");
  });

  it("refuses at sign-in an account a server's access rules do not admit: the refusal page, no code, audited", async () => {
    const client = await registerClient(t.url);
    const browser = new HttpBrowser();
    const { callback: atCallback } = await authorize(t.url, client, {
      user: "mallory",
      resource: mcpAt("private"),
      browser,
      stopAt: `${t.url}/oauth/callback`,
    });
    const refused = await browser.request(atCallback.href);
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain("Private notes");
    const event = await t.broker.database.db.auditEvent.findFirstOrThrow({ where: { type: "login.refused", clientId: client.client_id } });
    expect(JSON.parse(event.detail)).toMatchObject({ reason: "server_access_denied", resource: mcpAt("private") });
    // The same account may use the servers without rules; alice may use the private one.
    expect((await obtainTokens(t.url, { user: "mallory", resource: mcpAt("alpha") })).tokens.access_token).toBeTruthy();
    const alice = await obtainTokens(t.url, { user: "alice", resource: mcpAt("private") });
    expect((await initialize(mcpAt("private"), alice.tokens.access_token)).status).toBe(200);
  });

  it("lists the grants and the audit events of one server with --server", async () => {
    const beta = await obtainTokens(t.url, { user: "gina", resource: mcpAt("beta") });
    const alpha = await obtainTokens(t.url, { user: "gina", resource: mcpAt("alpha") });
    const cli = async (args: string[]) => {
      const { code, stdout, stderr } = await runCliCaptured(args, { cwd: t.dir, env: { ...brokerCliEnv(t), BROKER_CONFIG: file } });
      return { code, out: stdout + stderr };
    };
    const listed = await cli(["grants", "list", "--server", "beta", "--user", "demo:gina", "--json"]);
    expect(listed.code).toBe(0);
    const ids = (JSON.parse(listed.out) as Array<{ clientId: string }>).map((g) => g.clientId);
    expect(ids).toEqual([beta.client.client_id]);
    expect(ids).not.toContain(alpha.client.client_id);
    const events = await cli(["audit", "--server", "beta", "--json", "--since", "1h"]);
    expect(events.code).toBe(0);
    const clients = new Set((JSON.parse(events.out) as Array<{ clientId: string | null }>).map((e) => e.clientId));
    expect(clients).toContain(beta.client.client_id);
    expect(clients).not.toContain(alpha.client.client_id);
    const unknown = await cli(["grants", "list", "--server", "gamma"]);
    expect(unknown.code).toBe(2);
    expect(unknown.out).toContain("no such MCP server; the configuration has alpha, beta, tools, private");
  });

  it("groups a user's connected apps by server on /account", async () => {
    await obtainTokens(t.url, { user: "hana", resource: mcpAt("alpha") });
    await obtainTokens(t.url, { user: "hana", resource: mcpAt("beta") });
    const { page } = await new AccountVisitor(t.url).signIn("hana");
    expect(page.apps).toHaveLength(2);
    const headings = [...page.html.matchAll(/<h2 class="server-name">([^<]*)<\/h2>/g)].map((m) => m[1]);
    expect(headings.sort()).toEqual(["Alpha docs", "Beta tracker"]);
  });

  it("lists every server with its URL on the front page", async () => {
    const page = await (await fetch(`${t.url}/`)).text();
    for (const name of ["alpha", "beta", "tools"]) expect(page).toContain(mcpAt(name));
    expect(page).toContain("The first team&#39;s documents");
  });

  it("dispatches every path under /mcp by its mount: a JSON-RPC 404 where no server is, a server's own sub-paths to it, other paths to the rest", async () => {
    const post = (path: string) => fetch(`${t.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    for (const nowhere of ["/mcp", "/mcp/gamma", "/mcp/gamma/sub"]) {
      const res = await post(nowhere);
      expect(res.status).toBe(404);
      expect(await res.json()).toMatchObject({ jsonrpc: "2.0", error: { message: expect.stringContaining("No MCP server answers at this path") } });
    }
    // Below a server's mount: that server's route, which authenticates with its audience.
    const below = await post("/mcp/alpha/sub");
    expect(below.status).toBe(401);
    expect(below.headers.get("www-authenticate")).toContain(`resource_metadata="${t.url}/.well-known/oauth-protected-resource/mcp/alpha"`);
    // A path that merely starts with the same letters is not the MCP endpoint's.
    const other = await post("/mcpx");
    expect(other.status).toBe(404);
    expect(await other.json()).not.toHaveProperty("jsonrpc");
  });
});
