// Machine clients (client_credentials) carry no user, so only the operator can make one: a
// self-registered client must never reach /mcp without a login (found by an attack trial).
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { basicAuth, countRows, freshIp, postForm, postJson, registerOperatorClient } from "../support/oauth-client.ts";
import { toolText } from "../gateway/harness.ts";
import { ClientRegistry } from "../../src/grants/clients.ts";
import { parseClientMetadata } from "../../src/grants/client-metadata.ts";
import { startGitHubEmulator } from "../support/github-emulator.ts";

let t: TestBroker;
beforeAll(async () => {
  t = await startBroker({ TRUST_PROXY: "true" });
});
afterAll(async () => t.stop());

const initialize = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "t", version: "1" } },
};
const mcp = (token: string) =>
  fetch(`${t.url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify(initialize),
  });
const clientCredentials = (id: string, secret: string) =>
  postForm(`${t.url}/token`, { grant_type: "client_credentials" }, { authorization: basicAuth(id, secret) });

describe("machine clients", () => {
  it("the trial's sequence: /register refuses client_credentials and stores nothing", async () => {
    const before = await countRows(t.broker.database.db);
    const res = await postJson(
      `${t.url}/register`,
      { grant_types: ["client_credentials"], response_types: [], token_endpoint_auth_method: "client_secret_basic" },
      { "x-forwarded-for": freshIp() },
    );
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: "invalid_client_metadata" });
    expect(res.json!.error_description).toContain("clients add --grant-type client_credentials");
    expect(await countRows(t.broker.database.db)).toEqual(before);
  });

  it("/register refuses the token-exchange grant: only servers the operator registers exchange assertions", async () => {
    const before = await countRows(t.broker.database.db);
    const res = await postJson(
      `${t.url}/register`,
      { grant_types: ["urn:ietf:params:oauth:grant-type:token-exchange"], response_types: [], token_endpoint_auth_method: "client_secret_basic" },
      { "x-forwarded-for": freshIp() },
    );
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: "invalid_client_metadata" });
    expect(res.json!.error_description).toContain("exchangeClients");
    expect(await countRows(t.broker.database.db)).toEqual(before);
  });

  it("a client self-registered with client_credentials before the fix gets no token", async () => {
    // The row such a registration left behind: dynamic, allowed client_credentials by the old rules.
    const metadata = parseClientMetadata(
      { grant_types: ["client_credentials"], response_types: [], token_endpoint_auth_method: "client_secret_basic" },
      "manual",
    );
    const { client, clientSecret } = await new ClientRegistry(t.broker.database.db).register(metadata, "dynamic");
    const res = await clientCredentials(client.id, clientSecret!);
    expect(res.status).toBe(400);
    expect(res.json).toMatchObject({ error: "unauthorized_client" });
  });

  it("a token such a client obtained before the fix does not reach /mcp", async () => {
    const machine = await registerOperatorClient(t.broker.database.db);
    const issued = await clientCredentials(machine.client_id, machine.client_secret!);
    expect(issued.status).toBe(200);
    // Made what an old database holds: the same grant and token, of a self-registered client.
    await t.broker.database.db.client.update({ where: { id: machine.client_id }, data: { registrationType: "dynamic" } });
    const res = await mcp(issued.json!.access_token as string);
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain('error="invalid_token"');
    expect(res.headers.get("mcp-session-id")).toBeNull();
  });

  it("an operator-registered machine client reaches the MCP server as client:<id>, with no user", async () => {
    const machine = await registerOperatorClient(t.broker.database.db, { client_name: "Nightly job" });
    const issued = await clientCredentials(machine.client_id, machine.client_secret!);
    expect(issued.status).toBe(200);
    expect(issued.json).not.toHaveProperty("refresh_token");
    const transport = new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${issued.json!.access_token as string}` } },
    });
    const client = new Client({ name: "nightly", version: "1" });
    await client.connect(transport);
    try {
      const who = JSON.parse(toolText(await client.callTool({ name: "whoami", arguments: {} }))) as Record<string, unknown>;
      expect(who).toMatchObject({ subject: `client:${machine.client_id}`, clientId: machine.client_id, user: null });
    } finally {
      await client.close();
    }
    // Introspection names the same subject.
    const grant = await t.broker.database.db.grant.findFirstOrThrow({ where: { clientId: machine.client_id } });
    expect(grant.subject).toBe(`client:${machine.client_id}`);
  });

  it("a grant with neither a user nor a machine client behind it is refused at /mcp", async () => {
    // Whatever path might create one (a bug, a hand-edited row), /mcp does not honour it.
    const machine = await registerOperatorClient(t.broker.database.db);
    const issued = await clientCredentials(machine.client_id, machine.client_secret!);
    await t.broker.database.db.grant.updateMany({ where: { clientId: machine.client_id }, data: { kind: "authorization_code" } });
    expect((await mcp(issued.json!.access_token as string)).status).toBe(401);
  });
});

describe("ALLOW_ANY_USER speaks of people: a machine client is admitted only by name", () => {
  // README ("Who may sign in"): machine clients are admitted only when ALLOWED_USERS names them
  // (client:<id>, client:*). One database across restarts with different policies, as an operator
  // would change them; the GitHub emulator is the IdP (client_credentials never calls it).
  it("ALLOW_ANY_USER=true alone refuses its token request and its token; ALLOWED_USERS=client:<id> admits it", async () => {
    const gh = await startGitHubEmulator({ clientId: "Iv1.machines", clientSecret: "machines-secret" });
    const github = {
      UPSTREAM_PROVIDER: "github",
      UPSTREAM_CLIENT_ID: "Iv1.machines",
      UPSTREAM_CLIENT_SECRET: "machines-secret",
      GITHUB_URL: gh.url,
      GITHUB_API_URL: gh.apiUrl,
      SECRET_KEY: randomBytes(32).toString("base64"),
    };
    const first = await startBroker({ ...github, ALLOW_ANY_USER: "true" });
    const sameDatabase = { ...github, DATABASE_URL: `file:${first.dir}/broker.db` };
    let current = first;
    try {
      const machine = await registerOperatorClient(first.broker.database.db, { client_name: "Nightly job" });
      const tokenAt = (b: TestBroker) =>
        postForm(`${b.url}/token`, { grant_type: "client_credentials" }, { authorization: basicAuth(machine.client_id, machine.client_secret!) });
      const mcpAt = async (b: TestBroker, token: string) => {
        const res = await fetch(`${b.url}/mcp`, {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
          body: JSON.stringify(initialize),
        });
        await res.body?.cancel();
        return res.status;
      };

      const refused = await tokenAt(first);
      expect(refused.status).toBe(400);
      expect(refused.json).toMatchObject({ error: "unauthorized_client" });
      expect(refused.json!.error_description).toContain(`client:${machine.client_id}`);
      await first.stop({ keepDir: true });

      const named = await startBroker({ ...sameDatabase, ALLOW_ANY_USER: "true", ALLOWED_USERS: `client:${machine.client_id}` });
      current = named;
      const issued = await tokenAt(named);
      expect(issued.status).toBe(200);
      const token = issued.json!.access_token as string;
      expect(await mcpAt(named, token)).toBe(200);
      await named.stop({ keepDir: true });

      // The same token, after the operator dropped the name and kept ALLOW_ANY_USER=true.
      const unnamed = await startBroker({ ...sameDatabase, ALLOW_ANY_USER: "true" });
      current = unnamed;
      expect(await mcpAt(unnamed, token)).toBe(401);
    } finally {
      if (current !== first) await current.stop();
      await first.stop().catch(() => {}); // removes the database's folder (stopped already unless the first step failed)
      await gh.close();
    }
  });
});
