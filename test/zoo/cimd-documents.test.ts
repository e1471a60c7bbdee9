// The Client ID Metadata Documents real clients publish, field for field, as fetched and quoted in
// public trackers, each through /authorize to the consent page:
//
// - claude.ai, https://claude.ai/oauth/mcp-oauth-client-metadata: grant_types include
//   urn:ietf:params:oauth:grant-type:jwt-bearer (quoted by several servers' tests of it, e.g. the
//   django-oauth-toolkit users who found every claude.ai connection refused for it).
// - Claude Code, https://claude.ai/oauth/claude-code-client-metadata: no application_type
//   (anthropics/claude-code#37747, #41011).
// - VS Code, https://vscode.dev/oauth/client-metadata.json: application_type native together with
//   https://vscode.dev/redirect (on purpose, microsoft/vscode#252226), and the device code grant.
// - opencode, https://opencode.ai/oauth/opencode/client.json (anomalyco/opencode,
//   packages/console/app/src/routes/oauth/opencode/client.json.ts): application_type native.
// - ChatGPT's is in chatgpt.test.ts. Cursor publishes none (it registers dynamically).
//
// Every one carries client_name, so a document without it is refused, naming the field
// (test/oauth/cimd.test.ts); grant types a document names that this server does not know are left
// out instead of refusing the client; application_type is recorded and shown, never refused.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startDocumentServer, type DocumentServer } from "../support/document-server.ts";
import { authorizeUrl, openConsent, registerTestClient } from "../support/oauth-client.ts";
import { brokerCliEnv, runCliCaptured } from "../support/cli-in-process.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CLAUDE_CODE_DOCUMENT } from "./replays.ts";

interface Published {
  readonly host: string;
  readonly path: string;
  /** The document, its client_id aside (the test server's port goes into it). */
  readonly document: Record<string, unknown>;
  /** The redirect URI the client sends. */
  readonly redirect: string;
  readonly name: string;
  readonly applicationType: "native" | null;
}

const PUBLISHED: readonly Published[] = [
  {
    host: "claude.ai",
    path: "/oauth/mcp-oauth-client-metadata",
    document: {
      client_name: "Claude",
      client_uri: "https://claude.ai",
      redirect_uris: ["https://claude.ai/api/mcp/auth_callback"],
      grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    },
    redirect: "https://claude.ai/api/mcp/auth_callback",
    name: "Claude",
    applicationType: null,
  },
  {
    host: "claude.ai",
    path: "/oauth/claude-code-client-metadata",
    document: CLAUDE_CODE_DOCUMENT,
    redirect: "http://localhost:58135/callback",
    name: "Claude Code",
    applicationType: null,
  },
  {
    host: "vscode.dev",
    path: "/oauth/client-metadata.json",
    document: {
      client_name: "Visual Studio Code",
      logo_uri: "https://code.visualstudio.com/assets/branding/code-stable.png",
      grant_types: ["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      application_type: "native",
      client_uri: "https://vscode.dev/product",
      redirect_uris: ["http://127.0.0.1:33418/", "https://vscode.dev/redirect"],
    },
    redirect: "https://vscode.dev/redirect",
    name: "Visual Studio Code",
    applicationType: "native",
  },
  {
    host: "opencode.ai",
    path: "/oauth/opencode/client.json",
    document: {
      client_name: "opencode",
      client_uri: "https://opencode.ai",
      logo_uri: "https://opencode.ai/web-app-manifest-512x512.png",
      application_type: "native",
      redirect_uris: ["http://127.0.0.1/callback", "http://localhost/callback"],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      token_endpoint_auth_methods_supported: ["none"],
    },
    redirect: "http://127.0.0.1:51675/callback",
    name: "opencode",
    applicationType: "native",
  },
];

describe("the metadata documents real clients publish", () => {
  let docs: DocumentServer;
  let broker: TestBroker;
  const clientIdOf = (p: Published) => `https://${p.host}:${docs.port}${p.path}`;

  beforeAll(async () => {
    docs = await startDocumentServer(["claude.ai", "vscode.dev", "opencode.ai"]);
    for (const p of PUBLISHED) docs.json(p.path, { client_id: clientIdOf(p), ...p.document });
    const lookup = docs.lookup({ "claude.ai": "127.0.0.1", "vscode.dev": "127.0.0.1", "opencode.ai": "127.0.0.1" });
    broker = await startBroker({ CIMD_ALLOW_PRIVATE_NETWORKS: "true" }, { documentFetch: { lookup, ca: docs.caCert } });
  });
  afterAll(async () => {
    await broker.stop();
    await docs.close();
  });

  it.each(PUBLISHED.map((p) => [p.name, p] as const))("%s: accepted, named on the consent page, application_type recorded", async (_name, p) => {
    const consent = await openConsent(authorizeUrl(broker.url, { client_id: clientIdOf(p), redirect_uri: p.redirect }));
    expect(consent.html).toContain(`<span id="client-name">${p.name}</span>`);
    const row = await broker.broker.database.db.client.findUniqueOrThrow({ where: { id: clientIdOf(p) } });
    expect(row).toMatchObject({ registrationType: "cimd", clientName: p.name, applicationType: p.applicationType });
    // Only what this server knows is kept of the grant types the document lists.
    expect(JSON.parse(row.grantTypes)).toEqual(["authorization_code", "refresh_token"]);
  });

  it("VS Code returns through https://vscode.dev/redirect, yet it is an app on this computer: the consent page says so", async () => {
    const vscode = PUBLISHED.find((p) => p.host === "vscode.dev")!;
    const consent = await openConsent(authorizeUrl(broker.url, { client_id: clientIdOf(vscode), redirect_uri: vscode.redirect }));
    expect(consent.html).toMatch(/id="redirect-host">vscode\.dev<\/strong> <span class="muted">\(an app on this computer\)/);
    const claude = PUBLISHED.find((p) => p.path === "/oauth/mcp-oauth-client-metadata")!;
    const web = await openConsent(authorizeUrl(broker.url, { client_id: clientIdOf(claude), redirect_uri: claude.redirect }));
    expect(web.html).not.toContain("an app on this computer");
  });

  it("application_type from dynamic registration: recorded, echoed, never a reason to refuse", async () => {
    // VS Code's registration (fetchDynamicRegistration in microsoft/vscode src/vs/base/common/oauth.ts).
    const vscode = await registerTestClient(broker.url, {
      client_name: "Visual Studio Code",
      client_uri: "https://code.visualstudio.com",
      redirect_uris: ["https://insiders.vscode.dev/redirect", "https://vscode.dev/redirect", "http://127.0.0.1/", "http://127.0.0.1:33418/"],
      application_type: "native",
    });
    expect(vscode.application_type).toBe("native");
    for (const odd of ["web", "browser", 42, null]) {
      const client = await registerTestClient(broker.url, { application_type: odd });
      expect(client.application_type).toBe(odd === "web" ? "web" : undefined);
    }
    const row = await broker.broker.database.db.client.findUniqueOrThrow({ where: { id: vscode.client_id } });
    expect(row.applicationType).toBe("native");
  });

  it("clients list and show name the application type", async () => {
    const vscode = PUBLISHED.find((p) => p.host === "vscode.dev")!;
    await openConsent(authorizeUrl(broker.url, { client_id: clientIdOf(vscode), redirect_uri: vscode.redirect }));
    const cli = async (args: string[]) => {
      const { code, stdout } = await runCliCaptured(args, { cwd: broker.dir, env: brokerCliEnv(broker) });
      expect(code).toBe(0);
      return stdout;
    };
    expect(await cli(["clients", "list"])).toMatch(/Visual Studio Code +public +cimd \(vscode\.dev:\d+\) +native/);
    expect(await cli(["clients", "show", clientIdOf(vscode)])).toMatch(/application type: +native/);
    const listed = JSON.parse(await cli(["clients", "list", "--json"])) as Array<Record<string, unknown>>;
    expect(listed.find((c) => c.clientId === clientIdOf(vscode))).toMatchObject({ applicationType: "native" });
  });
});
