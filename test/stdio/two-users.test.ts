// Two users through the real SDK client and its real OAuth flow, in front of a stdio MCP server:
// each gets a process of their own, started with their own upstream token and nothing of the
// broker's environment; one user's session id is refused to the other before any child hears of it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { CallbackServer, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { bearerFor, connectAs, disconnect, fixtureEnv, MCP_HEADERS, whoami } from "./stdio-support.ts";

const METRICS = "metrics-token-of-the-two-users-test";

describe("a stdio MCP server fronted for two users", () => {
  let t: TestBroker;
  let callback: CallbackServer;
  let alice: ConnectedClient;
  let bob: ConnectedClient;
  beforeAll(async () => {
    [t, callback] = await Promise.all([startBroker({ ...fixtureEnv(), METRICS_TOKEN: METRICS }), new CallbackServer().start()]);
    alice = await connectAs(t.url, "alice", callback);
    bob = await connectAs(t.url, "bob", callback);
  }, 30_000);
  afterAll(async () => {
    await disconnect(alice);
    await disconnect(bob);
    await t?.stop();
    await callback?.close();
  });

  it("gives each user a process of their own, with their own upstream token", async () => {
    const [a, b] = await Promise.all([whoami(alice.client), whoami(bob.client)]);
    expect(a.pid).not.toBe(b.pid);
    expect(t.broker.stdioSessions!.pids().sort()).toEqual([a.pid, b.pid].sort());
    const db = t.broker.database.db;
    const tokenOf = async (login: string) => {
      const session = await db.upstreamSession.findFirstOrThrow({ where: { login }, orderBy: { createdAt: "desc" } });
      return (await t.broker.services.grants.sessions.tokensOf(session.id))?.accessToken;
    };
    expect(a.token).toBe(await tokenOf("alice"));
    expect(b.token).toBe(await tokenOf("bob"));
    expect(a.token).not.toBe(b.token);
  });

  it("passes nothing of the broker's environment but the allow-list (and the marker that names the broker run)", async () => {
    const { environment } = await whoami(alice.client);
    expect(environment).toContain("PATH");
    expect(environment).toContain("UPSTREAM_TOKEN");
    for (const name of environment)
      expect(name).toMatch(
        /^(PATH|HOME|USER|LOGNAME|SHELL|LANG|LANGUAGE|TZ|TMPDIR|TEMP|TMP|LC_[A-Z_]+|UPSTREAM_TOKEN|MCP_AUTH_BROKER_LEDGER|.*_proxy|.*_PROXY|NODE_EXTRA_CA_CERTS|SSL_CERT_FILE|SSL_CERT_DIR)$/,
      );
  });

  it("refuses one user's session id to the other with 403, counted as session_owner, and writes nothing to any child", async () => {
    const sessionOwnerRefusals = async () => {
      const text = await (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS}` } })).text();
      return Number(/^mab_refusals_total\{reason="session_owner"\} (\d+)$/m.exec(text)?.[1]);
    };
    const refusedBefore = await sessionOwnerRefusals();
    const bobAuth = await bearerFor(t.url, "bob");
    const sessions = t.broker.stdioSessions!;
    const aliceSession = alice.transport.sessionId!;
    const before = await whoami(alice.client);
    const written = () => [aliceSession, bob.transport.sessionId!].map((id) => sessions.find(id)!.child.messagesSent);
    const writtenBefore = written();
    const res = await fetch(`${t.url}/mcp`, {
      method: "POST",
      headers: { ...MCP_HEADERS, ...bobAuth, "mcp-session-id": aliceSession, "mcp-protocol-version": "2025-06-18" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "tools/call", params: { name: "whoami", arguments: {} } }),
    });
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({ error: { message: "Mcp-Session-Id belongs to another user" } });
    expect(written()).toEqual(writtenBefore);
    expect(await sessionOwnerRefusals()).toBe(refusedBefore + 1);
    // The session is untouched: Alice's requests still reach her child.
    expect((await whoami(alice.client)).pid).toBe(before.pid);
  });
});
