// Connected accounts, end to end: users sign in at the company's OIDC issuer, while the servers
// behind the broker act at other services with each user's own account there — an HTTP server
// (the SDK v2 recording server) that needs the user's GitHub account (the GitHub emulator), and a
// stdio server (the fixture) that needs an account at a plain OAuth 2 service (the OAuth 2
// emulator). The real MCP SDK clients do their own OAuth flows; the browser walks consent →
// sign-in → connect → continue. Who must not get a token: another user's server or child, the
// server of another connection, the MCP client (it never sees a connection token), and a client
// whose user lost the connection.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { UrlElicitationRequiredError } from "@modelcontextprotocol/client";
import { UrlElicitationRequiredError as V1UrlElicitationRequiredError } from "@modelcontextprotocol/sdk/types.js";
import { connectWithOAuth } from "../support/mcp-oauth-client.ts";
import { AccountVisitor } from "../account/account-visitor.ts";
import { sha256Hex } from "../../src/crypto/tokens.ts";
import { TOKEN_EXCHANGE } from "../../src/grants/types.ts";
import { answerAs } from "../support/http-browser.ts";
import { connectV2WithOAuth } from "../support/v2-client.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { fixtureCommand } from "../stdio/stdio-support.ts";
import { toolText } from "../gateway/harness.ts";
import { cancellingBrowser, connectingBrowser, startConnectedAccounts, type ConnectedAccounts } from "../support/connections.ts";

const GROUPS: Record<string, string[]> = {
  ada: ["staff"],
  bo: ["staff"],
  cy: ["staff"],
  di: ["staff"],
  eli: ["staff"],
  fay: ["staff"],
  gil: ["staff"],
  hal: ["staff"],
};

let records: V2McpServer;
let world: ConnectedAccounts;

beforeAll(async () => {
  records = await startV2McpServer();
  world = await startConnectedAccounts(
    GROUPS,
    [
      "  - name: code",
      "    title: Code search",
      `    url: ${records.url}`,
      "    connection: github",
      "    exchangeClients: [mab_c_code-server]",
      "  - name: issues",
      "    title: Issues",
      `    command: ${JSON.stringify(`${fixtureCommand} TRACKER_TOKEN`)}`,
      "    connection: tracker",
      "    connectionInject: { env: TRACKER_TOKEN }",
      "    exchangeClients: [mab_c_issues-server]",
      // Every request asks the services again: a revocation there shows at the next call.
    ],
    { UPSTREAM_RECHECK_SECONDS: "0" },
  );
  // The servers' own registrations (as `clients add` makes them), for the token exchange; and a
  // confidential client no server names.
  for (const id of ["mab_c_code-server", "mab_c_issues-server", "mab_c_stranger"])
    await world.at.broker.broker.database.db.client.create({
      data: {
        id,
        secretHash: sha256Hex(`${id}-secret`),
        redirectUris: "[]",
        tokenEndpointAuthMethod: "client_secret_basic",
        grantTypes: JSON.stringify([TOKEN_EXCHANGE]),
        responseTypes: "[]",
        clientName: id,
        registrationType: "manual",
      },
    });
}, 30_000);
afterAll(async () => {
  await world?.close();
  await records?.close();
});

/** Who a GitHub token belongs to, asked of GitHub (the emulator). */
async function githubLoginOf(token: string): Promise<string | null> {
  const res = await fetch(`${world.github.apiUrl}/user`, { headers: { authorization: `Bearer ${token}` } });
  return res.ok ? ((await res.json()) as { login: string }).login : null;
}

/** Who a tracker token belongs to, asked of the tracker (the emulator). */
async function trackerLoginOf(token: string): Promise<string | null> {
  const res = await fetch(world.tracker.userinfoUrl, { headers: { authorization: `Bearer ${token}` } });
  return res.ok ? ((await res.json()) as { login: string }).login : null;
}

const mcpAt = (name: string) => world.at.mcpAt(name);

describe("a server that needs the user's GitHub account", () => {
  it("connects the account during the authorization, then sends that user's own GitHub token", async () => {
    const pages: string[] = [];
    const connected = await connectWithOAuth(mcpAt("code"), world.at.callback, connectingBrowser(world.at.callback.url, "ada", "ada-gh", pages));
    try {
      // consent → issuer login → the connect step → GitHub's login → the connect step again (Continue).
      const connectSteps = pages.filter((p) => p.includes('id="connect-heading"'));
      expect(connectSteps).toHaveLength(2);
      expect(connectSteps[0]).toContain("Connect your GitHub account");
      expect(connectSteps[0]).toContain("needed by Code search");
      expect(connectSteps[1]).toContain("connected as <strong>ada-gh</strong>");
      const before = records.requests.length;
      expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "hi" } }))).toBe("hi");
      const seen = records.requests.slice(before);
      expect(seen.length).toBeGreaterThan(0);
      for (const r of seen) {
        const token = String(r.headers.authorization ?? "").replace(/^Bearer /, "");
        expect(await githubLoginOf(token)).toBe("ada-gh");
        // Not the login token, nor the broker's own.
        expect(token).not.toBe(connected.provider.tokens()?.access_token);
        expect(r.headers["x-auth-subject"]).toBe("oidc:ada");
      }
      // The connection is listed for the user, with the account and its scopes.
      const row = await world.at.broker.broker.database.db.connection.findUniqueOrThrow({ where: { subject_name: { subject: "oidc:ada", name: "github" } } });
      expect(row).toMatchObject({ accountLogin: "ada-gh", provider: "github", status: "active" });
      // Stored encrypted: the token itself is nowhere in the row.
      const token = String(seen[0]!.headers.authorization).replace(/^Bearer /, "");
      expect(JSON.stringify(row)).not.toContain(token);
    } finally {
      await connected.client.close();
    }
  });
});

describe("a stdio server that needs an account at a plain OAuth 2 service", () => {
  it("starts the user's child with that user's own token in the variable the entry names", async () => {
    world.tracker.nextUser = "bo-tr";
    const connected = await connectWithOAuth(mcpAt("issues"), world.at.callback, connectingBrowser(world.at.callback.url, "bo", "unused"));
    try {
      const seen = JSON.parse(toolText(await connected.client.callTool({ name: "whoami", arguments: {} }))) as { token: string | null; environment: string[] };
      expect(seen.token).not.toBeNull();
      expect(await trackerLoginOf(seen.token!)).toBe("bo-tr");
      // Nothing of the broker's own secrets, and no other token variable.
      expect(seen.environment).not.toContain("SECRET_KEY");
      expect(seen.environment).not.toContain("UPSTREAM_TOKEN");
    } finally {
      await connected.client.close();
    }
  });
});

describe("two users, two connections", () => {
  it("gives each server and each child only its own user's token for its own connection", async () => {
    const users = [
      { user: "cy", github: "cy-gh", tracker: "cy-tr" },
      { user: "di", github: "di-gh", tracker: "di-tr" },
    ];
    const children: { user: string; token: string | null }[] = [];
    for (const u of users) {
      world.tracker.nextUser = u.tracker;
      const code = await connectV2WithOAuth(mcpAt("code"), "2026-07-28", world.at.callback, connectingBrowser(world.at.callback.url, u.user, u.github));
      const issues = await connectWithOAuth(mcpAt("issues"), world.at.callback, connectingBrowser(world.at.callback.url, u.user, u.github));
      try {
        await code.client.callTool({ name: "echo", arguments: { message: u.user } });
        const seen = JSON.parse(toolText(await issues.client.callTool({ name: "whoami", arguments: {} }))) as { token: string | null; environment: string[] };
        children.push({ user: u.user, token: seen.token });
        // A stdio child of one connection carries nothing of the other.
        expect(seen.environment.filter((name) => /TOKEN/.test(name))).toEqual(["TRACKER_TOKEN"]);
      } finally {
        await code.client.close();
        await issues.client.close();
      }
    }
    for (const child of children) expect(await trackerLoginOf(child.token!)).toBe(`${child.user}-tr`);
    // Every request the HTTP server saw from these users: the GitHub token of the user it was for.
    const mine = records.requests.filter((r) => ["oidc:cy", "oidc:di"].includes(String(r.headers["x-auth-subject"])));
    expect(mine.length).toBeGreaterThan(0);
    for (const r of mine) {
      const token = String(r.headers.authorization ?? "").replace(/^Bearer /, "");
      const subject = String(r.headers["x-auth-subject"]);
      expect(await githubLoginOf(token)).toBe(`${subject.slice("oidc:".length)}-gh`);
      // The tracker's tokens never reach the GitHub server.
      for (const child of children) expect(JSON.stringify(r.headers)).not.toContain(child.token!);
    }
  });
});

/** Connects `githubUser`'s GitHub account from /account, signed in there as `user`; the page after. */
async function reconnectAtAccount(user: string, githubUser: string): Promise<string> {
  const visitor = new AccountVisitor(world.at.broker.url);
  await visitor.signIn(user);
  const { csrf } = await visitor.open();
  const res = await visitor.browser.request(`${world.at.broker.url}/account/connect/github`, { form: { csrf, action: "connect" } });
  expect(res.status).toBe(303);
  const back = await visitor.browser.walk(res.headers.get("location")!, `${world.at.broker.url}/account`, answerAs(githubUser));
  expect(back.searchParams.get("notice")).toBe("connected");
  return (await visitor.browser.request(back.href)).text();
}

describe("a connection revoked at the service", () => {
  it("answers -32042 with the connect link to a client that declared URL elicitation; reconnecting restores it", async () => {
    const connected = await connectV2WithOAuth(
      mcpAt("code"),
      "2026-07-28",
      world.at.callback,
      connectingBrowser(world.at.callback.url, "ada", "ada-gh"),
      {},
      { elicitation: { url: {} } },
    );
    try {
      expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "before" } }))).toBe("before");
      const clients = await world.at.broker.broker.database.db.client.count();
      world.github.revokeUser("ada-gh");
      const before = records.requests.length;
      const thrown = await connected.client.callTool({ name: "echo", arguments: { message: "after" } }).catch((err: unknown) => err);
      expect(thrown).toBeInstanceOf(UrlElicitationRequiredError);
      const elicitation = (thrown as UrlElicitationRequiredError).elicitations[0]!;
      expect(elicitation.url).toBe(`${world.at.broker.url}/account/connect/github`);
      expect(elicitation.message).toContain("GitHub");
      // Nothing reached the server, and the grant stays: the client keeps its token.
      expect(records.requests.length).toBe(before);
      const page = await reconnectAtAccount("ada", "ada-gh");
      expect(page).toContain("Connected accounts");
      expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "again" } }))).toBe("again");
      const token = String(records.requests.at(-1)!.headers.authorization).replace(/^Bearer /, "");
      expect(await githubLoginOf(token)).toBe("ada-gh");
      // No new registration was needed.
      expect(await world.at.broker.broker.database.db.client.count()).toBe(clients);
    } finally {
      await connected.client.close();
    }
  });

  it("answers -32042 to a session client that declared URL elicitation at initialize (SDK v1, 2025-11-25)", async () => {
    // The 2025 revisions declare capabilities once, in initialize; later requests carry none.
    const connected = await connectWithOAuth(mcpAt("code"), world.at.callback, connectingBrowser(world.at.callback.url, "gil", "gil-gh"), undefined, {
      elicitation: { url: {} },
    });
    try {
      expect(connected.transport.sessionId).toBeDefined();
      expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "before" } }))).toBe("before");
      world.github.revokeUser("gil-gh");
      const before = records.requests.length;
      const thrown = await connected.client.callTool({ name: "echo", arguments: { message: "after" } }).catch((err: unknown) => err);
      expect(thrown).toBeInstanceOf(V1UrlElicitationRequiredError);
      expect((thrown as V1UrlElicitationRequiredError).elicitations[0]!.url).toBe(`${world.at.broker.url}/account/connect/github`);
      // What is not a request is taken and dropped meanwhile: the grant must not end over a notification.
      const notified = await fetch(mcpAt("code"), {
        method: "POST",
        headers: {
          authorization: `Bearer ${connected.provider.tokens()?.access_token}`,
          "mcp-session-id": connected.transport.sessionId!,
          "mcp-protocol-version": "2025-11-25",
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 99 } }),
      });
      expect(notified.status).toBe(202);
      expect(records.requests.length).toBe(before);
      // The grant stays: reconnecting is all it takes.
      await reconnectAtAccount("gil", "gil-gh");
      expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "again" } }))).toBe("again");
    } finally {
      await connected.client.close();
    }
  });

  it("ends the grant of a client that did not, whose new authorization asks to connect again", async () => {
    const pages: string[] = [];
    const connected = await connectWithOAuth(mcpAt("code"), world.at.callback, connectingBrowser(world.at.callback.url, "bo", "bo-gh", pages));
    try {
      await connected.client.callTool({ name: "echo", arguments: { message: "before" } });
      const grant = await world.at.broker.broker.database.db.grant.findFirstOrThrow({
        where: { subject: "oidc:bo", resource: mcpAt("code"), revokedAt: null },
      });
      world.github.revokeUser("bo-gh");
      const before = records.requests.length;
      pages.length = 0;
      const thrown = await connected.client.callTool({ name: "echo", arguments: { message: "after" } }).catch((err: unknown) => err);
      expect(thrown).toBeInstanceOf(UnauthorizedError);
      expect(records.requests.length).toBe(before);
      const ended = await world.at.broker.broker.database.db.grant.findUniqueOrThrow({ where: { id: grant.id } });
      expect(ended.revokedReason).toBe("connection_invalid");
      // The SDK sent the user to authorize again: the connect step was shown, and GitHub asked.
      expect(pages.some((p) => p.includes("Connect your GitHub account"))).toBe(true);
      const { code } = await world.at.callback.next();
      await connected.transport.finishAuth(code!);
      expect(toolText(await connected.client.callTool({ name: "echo", arguments: { message: "again" } }))).toBe("again");
      const token = String(records.requests.at(-1)!.headers.authorization).replace(/^Bearer /, "");
      expect(await githubLoginOf(token)).toBe("bo-gh");
    } finally {
      await connected.client.close();
    }
  });
});

describe("the connections on /account", () => {
  it("lists the user's accounts; Disconnect revokes at the service and ends the grants of the servers that need it", async () => {
    world.tracker.nextUser = "eli-tr";
    const connected = await connectWithOAuth(mcpAt("issues"), world.at.callback, connectingBrowser(world.at.callback.url, "eli", "unused"));
    try {
      await connected.client.callTool({ name: "whoami", arguments: {} });
      const visitor = new AccountVisitor(world.at.broker.url);
      await visitor.signIn("eli");
      const page = await (await visitor.browser.request(visitor.pageUrl)).text();
      expect(page).toMatch(/id="connection-tracker"[\s\S]*eli-tr[\s\S]*Disconnect/);
      expect(page).toMatch(/id="connection-github"[\s\S]*not connected/);
      const { csrf } = await visitor.open();
      // A form without this browser's CSRF token changes nothing.
      const forged = await visitor.browser.request(`${world.at.broker.url}/account/connect/tracker`, { form: { csrf: "forged", action: "disconnect" } });
      expect(forged.status).toBe(403);
      expect(world.tracker.liveTokenCount("eli-tr")).toBeGreaterThan(0);
      const res = await visitor.browser.request(`${world.at.broker.url}/account/connect/tracker`, { form: { csrf, action: "disconnect" } });
      expect(res.status).toBe(303);
      expect(res.headers.get("location")).toBe(`${world.at.broker.url}/account?notice=disconnected`);
      expect(world.tracker.liveTokenCount("eli-tr")).toBe(0);
      const grants = await world.at.broker.broker.database.db.grant.findMany({ where: { subject: "oidc:eli", resource: mcpAt("issues") } });
      expect(grants.map((g) => g.revokedReason)).toEqual(["connection_removed"]);
      // The client's token is dead with its grant.
      const answer = await fetch(mcpAt("issues"), {
        method: "POST",
        headers: {
          authorization: `Bearer ${connected.provider.tokens()?.access_token}`,
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(answer.status).toBe(401);
    } finally {
      await connected.client.close();
    }
  });

  it("sends a link to an unknown connection to a page that says so", async () => {
    const res = await fetch(`${world.at.broker.url}/account/connect/nothing-here`);
    expect(res.status).toBe(404);
    expect(await res.text()).toContain("Unknown service");
  });
});

describe("cancel at the connect step", () => {
  it("sends the client access_denied from this issuer, and makes no grant", async () => {
    const landed: URL[] = [];
    await expect(connectWithOAuth(mcpAt("code"), world.at.callback, cancellingBrowser(world.at.callback.url, "hal", landed))).rejects.toThrow(
      "authorization failed: access_denied",
    );
    expect(landed).toHaveLength(1);
    expect(landed[0]!.searchParams.get("error_description")).toBe("The user did not connect the account the server needs.");
    expect(landed[0]!.searchParams.get("iss")).toBe(world.at.broker.url);
    expect(await world.at.broker.broker.database.db.grant.count({ where: { subject: "oidc:hal" } })).toBe(0);
  });
});

/** The token endpoint, as a server authenticating with its client secret calls it. */
async function exchange(clientId: string, form: Record<string, string>): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${world.at.broker.url}/token`, {
    method: "POST",
    headers: {
      authorization: `Basic ${Buffer.from(`${clientId}:${clientId}-secret`).toString("base64")}`,
      "content-type": "application/x-www-form-urlencoded",
    },
    body: new URLSearchParams({ grant_type: TOKEN_EXCHANGE, subject_token_type: "urn:ietf:params:oauth:token-type:jwt", ...form }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

describe("token exchange (RFC 8693) for a server that fetches the token itself", () => {
  it("gives the entitled server the user's token for its connection, and nothing to anyone else", async () => {
    const connected = await connectWithOAuth(mcpAt("code"), world.at.callback, connectingBrowser(world.at.callback.url, "fay", "fay-gh"));
    try {
      const before = records.requests.length;
      await connected.client.callTool({ name: "echo", arguments: { message: "x" } });
      const assertion = String(records.requests.slice(before).at(-1)!.headers["x-auth-assertion"]);
      const granted = await exchange("mab_c_code-server", { subject_token: assertion, resource: "github" });
      if (granted.status !== 200) throw new Error(JSON.stringify(granted.body));
      expect(granted.body).toMatchObject({ issued_token_type: "urn:ietf:params:oauth:token-type:access_token", token_type: "Bearer" });
      expect(await githubLoginOf(String(granted.body.access_token))).toBe("fay-gh");
      // `audience` names it as well.
      expect((await exchange("mab_c_code-server", { subject_token: assertion, audience: "github" })).status).toBe(200);
      // Another server, with this server's assertion: made for someone else.
      expect(await exchange("mab_c_issues-server", { subject_token: assertion, resource: "tracker" })).toMatchObject({
        status: 400,
        body: { error: "invalid_grant" },
      });
      // The entitled server, for a connection it does not name.
      expect(await exchange("mab_c_code-server", { subject_token: assertion, resource: "tracker" })).toMatchObject({
        status: 400,
        body: { error: "invalid_target" },
      });
      // A subject token that is not the broker's assertion.
      const forged = `${assertion.split(".").slice(0, 2).join(".")}.${Buffer.from("forged").toString("base64url")}`;
      expect(await exchange("mab_c_code-server", { subject_token: forged, resource: "github" })).toMatchObject({
        status: 400,
        body: { error: "invalid_grant" },
      });
      // The MCP client itself (public, registered for the code grant) gets nothing.
      const publicClient = connected.provider.clientInformation()!.client_id;
      const asClient = await fetch(`${world.at.broker.url}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: TOKEN_EXCHANGE,
          client_id: publicClient,
          subject_token: assertion,
          subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
          resource: "github",
        }),
      });
      expect(asClient.status).toBe(400);
      expect(((await asClient.json()) as { error: string }).error).toBe("unauthorized_client");
      // A user who revoked the app: its assertion buys nothing any more.
      const grant = await world.at.broker.broker.database.db.grant.findFirstOrThrow({
        where: { subject: "oidc:fay", resource: mcpAt("code"), revokedAt: null },
      });
      await world.at.broker.broker.services.grants.lifecycle.revokeGrant(grant.id, "user_revoked");
      expect(await exchange("mab_c_code-server", { subject_token: assertion, resource: "github" })).toMatchObject({
        status: 400,
        body: { error: "invalid_grant" },
      });
      const audited = await world.at.broker.broker.database.db.auditEvent.findMany({ where: { type: "connection.token_exchanged", subject: "oidc:fay" } });
      expect(audited).toHaveLength(2);
    } finally {
      await connected.client.close();
    }
  });

  it("answers each malformed exchange request with the OAuth error that names its fault", async () => {
    const github = { subject_token: "not-yet-checked", resource: "github" };
    // A confidential client the operator registered, that no server names in exchangeClients.
    expect(await exchange("mab_c_stranger", github)).toMatchObject({ status: 400, body: { error: "unauthorized_client" } });
    // No connection named, or two different ones.
    expect(await exchange("mab_c_code-server", { subject_token: "x" })).toMatchObject({ status: 400, body: { error: "invalid_request" } });
    expect(await exchange("mab_c_code-server", { ...github, audience: "tracker" })).toMatchObject({ status: 400, body: { error: "invalid_target" } });
    // A subject token of another type, or another token type asked for.
    expect(await exchange("mab_c_code-server", { ...github, subject_token_type: "urn:ietf:params:oauth:token-type:access_token" })).toMatchObject({
      status: 400,
      body: { error: "invalid_request" },
    });
    expect(await exchange("mab_c_code-server", { ...github, requested_token_type: "urn:ietf:params:oauth:token-type:refresh_token" })).toMatchObject({
      status: 400,
      body: { error: "invalid_request" },
    });
    // A subject token that is no JWT at all.
    const notJwt = await exchange("mab_c_code-server", github);
    expect(notJwt).toMatchObject({ status: 400, body: { error: "invalid_grant" } });
    expect(String(notJwt.body.error_description)).toContain("not an identity assertion the broker made for this server");
  });
});
