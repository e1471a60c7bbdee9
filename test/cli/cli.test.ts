// The operator CLI, run as the real binary against the database of a running broker.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { spawn } from "node:child_process";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { freePort, startBroker, type TestBroker } from "../support/start-broker.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { cleanEnv, cliBin, projectRoot, runCliBinary, runToEnd, waitForOutput, type Finished } from "../support/spawn.ts";
import { preparedDatabaseUrl } from "../support/broker-process.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { runCliCaptured, type CliResult } from "../support/cli-in-process.ts";
import { clientMetadataColumns } from "../../src/grants/client-metadata.ts";
import { parseMetadataDocument } from "../../src/grants/metadata-documents.ts";
import { postgresAvailable } from "../support/pg-database.ts";
import { mcpStatus as probeMcp } from "../support/mcp-probe.ts";
import { until } from "../support/wait.ts";

let t: TestBroker;
let env: Record<string, string>;
const packageVersion = (JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as { version: string }).version;

/** The CLI in-process: the same program as the binary, on this test's environment and output. */
const cli = (args: string[], options: { cwd?: string; env?: Record<string, string> } = {}): Promise<CliResult> =>
  runCliCaptured(args, { cwd: options.cwd ?? t.dir, env: options.env ?? env });

/** The real binary, for what only a process shows (argv, exit code, output streams). */
const binary = (args: string[]) => runCliBinary(args, { cwd: t.dir, env });

const mcpStatus = (token: string) => probeMcp(t.url, token);

beforeAll(async () => {
  t = await startBroker();
  env = {
    DATABASE_URL: t.broker.config.databaseUrl,
    SECRET_KEY: t.broker.config.secretKey.toString("base64"),
    PUBLIC_URL: t.url,
    PORT: String(t.broker.config.port),
  };
});
afterAll(async () => t.stop());

describe("mcp-auth-broker CLI", () => {
  it("the binary lists its commands with --help, prints its version, and exits 2 on usage errors", async () => {
    const [help, version, bad] = await Promise.all([binary(["--help"]), binary(["--version"]), binary(["clients", "show"])]);
    expect(help.code).toBe(0);
    for (const command of ["clients", "grants", "migrate", "purge", "check"]) expect(help.stdout).toContain(command);
    expect(version.stdout.trim()).toBe(packageVersion);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("missing required argument");
  });

  it("the binary's serve starts the server (what npm start runs) and exits 0 on SIGTERM", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-serve-"));
    // A migrated copy: migrating is the migrate command's test, below.
    const child = spawn(process.execPath, [cliBin, "serve"], {
      cwd: dir,
      env: cleanEnv({ PORT: "0", LOG_LEVEL: "warn", LOG_FORMAT: "pretty", DATABASE_URL: await preparedDatabaseUrl(dir) }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const finished = runToEnd(child, 30_000);
    try {
      const banner = await waitForOutput(child, /listening on 127\.0\.0\.1:(\d+)/);
      const port = /listening on 127\.0\.0\.1:(\d+)/.exec(banner)![1]!;
      const health = await fetch(`http://127.0.0.1:${port}/healthz`);
      expect(await health.json()).toEqual({ status: "ok" });
      child.kill("SIGTERM");
      expect((await finished).code).toBe(0);
    } finally {
      // A failed expectation must not leave the server running after the suite.
      if (child.exitCode === null) child.kill("SIGKILL");
    }
  });

  it("lists its commands with --help, and exits 2 on usage errors", async () => {
    const help = await cli(["--help"]);
    expect(help.code).toBe(0);
    for (const command of ["clients", "grants", "migrate", "purge"]) expect(help.stdout).toContain(command);
    const sub = await cli(["clients", "--help"]);
    expect(sub.stdout).toMatch(/list[\s\S]*add[\s\S]*show[\s\S]*remove/);
    const wrong = await cli(["frobnicate"]);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain("unknown command");
    // A command group without its subcommand, or nothing at all: usage on stderr, exit 2.
    for (const args of [["clients"], ["grants"], ["sessions"], []]) {
      const incomplete = await cli(args);
      expect([args, incomplete.code, incomplete.stdout]).toEqual([args, 2, ""]);
      expect(incomplete.stderr).toContain("Usage: mcp-auth-broker");
    }
  });

  it("clients list shows the Client ID Metadata Document clients the broker has seen, with their host", async () => {
    // The row /authorize records for a client whose document it fetched (test/oauth/cimd.test.ts).
    const id = "https://apps.example.test/cli/client.json";
    const document = {
      client_id: id,
      client_name: "Docs Agent",
      redirect_uris: ["http://127.0.0.1/callback"],
      token_endpoint_auth_method: "none",
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    };
    // Its columns as /authorize computes them from the document.
    const columns = clientMetadataColumns(parseMetadataDocument(id, document));
    await t.broker.database.db.client.create({ data: { id, registrationType: "cimd", ...columns } });
    const list = JSON.parse((await cli(["clients", "list", "--json"])).stdout) as Array<Record<string, unknown>>;
    expect(list.find((c) => c.clientId === id)).toMatchObject({
      clientName: "Docs Agent",
      registrationType: "cimd",
      metadataDocument: { host: "apps.example.test", verified: false },
    });
    const human = await cli(["clients", "list"]);
    expect(human.stdout).toMatch(/Docs Agent +public +cimd \(apps\.example\.test\)/);
    expect((await cli(["clients", "show", id])).stdout).toContain("cimd (apps.example.test) at");
  });

  it("migrate applies pending migrations to a new database, then reports it up to date, and tells Prisma's checkpoint server nothing", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-cli-"));
    const fresh = { ...env, DATABASE_URL: `file:${path.join(dir, "new.db")}` };
    // Prisma's CLI, unless told not to, starts its checkpoint client (a report to
    // checkpoint.prisma.io), which first writes ~/.cache/checkpoint-nodejs/signature.
    const home = path.join(dir, "home");
    const saved = { HOME: process.env.HOME, XDG_CACHE_HOME: process.env.XDG_CACHE_HOME };
    process.env.HOME = home;
    delete process.env.XDG_CACHE_HOME;
    let first: Finished;
    try {
      first = await cli(["migrate", "--json"], { cwd: dir, env: fresh });
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
    expect(existsSync(path.join(home, ".cache", "checkpoint-nodejs"))).toBe(false);
    expect(first.code).toBe(0);
    expect((JSON.parse(first.stdout) as { applied: string[] }).applied).toEqual(
      expect.arrayContaining(["20261122140000_init", "20261122160000_revocation_feed"]),
    );
    const second = await cli(["migrate"], { cwd: dir, env: fresh });
    expect(second.stdout).toContain("up to date");
  });

  it("clients add registers a confidential client and prints its secret once; list and show find it", async () => {
    const added = await cli(["clients", "add", "--name", "Ops bot", "--redirect-uri", "https://bot.example/callback", "--json"]);
    expect(added.code).toBe(0);
    const client = JSON.parse(added.stdout) as { clientId: string; clientSecret: string };
    expect(client.clientSecret).toMatch(/^mab_cs_/);
    const row = await t.broker.database.db.client.findUniqueOrThrow({ where: { id: client.clientId } });
    expect(row.registrationType).toBe("manual");
    expect(row.secretHash).not.toContain(client.clientSecret);
    const list = await cli(["clients", "list", "--json"]);
    expect((JSON.parse(list.stdout) as Array<{ clientId: string }>).find((c) => c.clientId === client.clientId)).toMatchObject({
      clientName: "Ops bot",
      type: "confidential",
    });
    expect(list.stdout).not.toContain(client.clientSecret);
    const human = await cli(["clients", "list"]);
    expect(human.stdout).toMatch(/^ID +NAME +TYPE/m);
    const show = await cli(["clients", "show", client.clientId]);
    expect(show.stdout).toContain("Ops bot");
    expect(show.stdout).toContain("confidential");
    const missing = await cli(["clients", "show", "nope"]);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("no client with id nope");
  });

  it("clients add refuses invalid metadata with a clear message", async () => {
    const bad = await cli(["clients", "add", "--name", "Bad", "--redirect-uri", "http://evil.example/cb"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/invalid client: redirect_uris .*https/);
  });

  it("clients add takes an app-scheme redirect for a public client, as /register does, unless turned off", async () => {
    const args = ["clients", "add", "--name", "Cursor", "--public", "--redirect-uri", "cursor://anysphere.cursor-mcp/oauth/callback", "--json"];
    const added = await cli(args);
    expect(added.code).toBe(0);
    expect(JSON.parse(added.stdout).redirectUris).toEqual(["cursor://anysphere.cursor-mcp/oauth/callback"]);
    const off = await cli(args, { env: { ...env, ALLOW_APP_SCHEME_REDIRECTS: "false" } });
    expect(off.code).toBe(2);
    expect(off.stderr).toContain("cursor://");
  });

  it("clients add --grant-type client_credentials makes a machine client that reaches /mcp as client:<id>", async () => {
    const added = await cli(["clients", "add", "--name", "Nightly job", "--grant-type", "client_credentials", "--json"]);
    expect(added.code).toBe(0);
    const machine = JSON.parse(added.stdout) as { clientId: string; clientSecret: string; grantTypes: string[] };
    expect(machine.grantTypes).toEqual(["client_credentials"]);
    const issued = await fetch(`${t.url}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${machine.clientId}:${machine.clientSecret}`).toString("base64")}`,
      },
      body: "grant_type=client_credentials",
    });
    expect(issued.status).toBe(200);
    const { access_token } = (await issued.json()) as { access_token: string };
    expect(await mcpStatus(access_token)).toBe(200);
    const grant = await t.broker.database.db.grant.findFirstOrThrow({ where: { clientId: machine.clientId } });
    expect(grant.subject).toBe(`client:${machine.clientId}`);
  });

  it("grants list shows live grants; grants revoke (by id and by --user) cuts access at once", async () => {
    const alice = await obtainTokens(t.url, { user: "alice" });
    const bob = await obtainTokens(t.url, { user: "bob" });
    expect(await mcpStatus(alice.tokens.access_token)).toBe(200);
    const list = JSON.parse((await cli(["grants", "list", "--json"])).stdout) as Array<{ id: string; subject: string; status: string }>;
    const aliceGrant = list.find((g) => g.subject === "demo:alice")!;
    expect(aliceGrant.status).toBe("live");
    const onlyBob = JSON.parse((await cli(["grants", "list", "--user", "demo:bob", "--json"])).stdout) as Array<{ subject: string }>;
    expect(onlyBob.map((g) => g.subject)).toEqual(["demo:bob"]);
    // "sessions", the contract's word for the same command.
    expect(JSON.parse((await cli(["sessions", "list", "--user", "demo:bob", "--json"])).stdout)).toEqual(onlyBob);

    const byId = await cli(["grants", "revoke", aliceGrant.id]);
    expect(byId.code).toBe(0);
    expect(byId.stdout).toContain("Revoked 1 grant(s)");
    // The running broker learns of revocations made by another process from its revocation feed.
    await t.broker.services.grants.revocationFeed.poll();
    expect(await mcpStatus(alice.tokens.access_token)).toBe(401);

    const byUser = await cli(["grants", "revoke", "--user", "demo:bob", "--json"]);
    expect(JSON.parse(byUser.stdout).revoked).toHaveLength(1);
    // Without a manual poll: the feed's own period (1 s) is enough.
    await until(async () => (await mcpStatus(bob.tokens.access_token)) === 401, "the revocation feed to end bob's grant");
    const refresh = await fetch(`${t.url}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: bob.tokens.refresh_token, client_id: bob.client.client_id }),
    });
    expect(((await refresh.json()) as { error: string }).error).toBe("invalid_grant");

    const none = await cli(["grants", "revoke"]);
    expect(none.code).toBe(2);
    const unknown = await cli(["grants", "revoke", "no-such-grant"]);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain("no grant with id");
  });

  it("grants list filters by client, --all adds revoked grants with their reason; clients show counts live grants", async () => {
    const erin = await obtainTokens(t.url, { user: "erin" });
    const clientId = erin.client.client_id;
    const listed = async (...args: string[]) =>
      JSON.parse((await cli(["grants", "list", "--client", clientId, "--json", ...args])).stdout) as Array<{
        id: string;
        subject: string;
        user: string;
        clientId: string;
        status: string;
        revokedReason: string | null;
        revokedAt: string | null;
        ended: { reason: string; at: string } | null;
      }>;
    const live = await listed();
    expect(live).toEqual([expect.objectContaining({ subject: "demo:erin", user: "erin", clientId, status: "live", revokedAt: null, ended: null })]);
    expect(JSON.parse((await cli(["clients", "show", clientId, "--json"])).stdout).liveGrants).toBe(1);

    expect((await cli(["grants", "revoke", live[0]!.id])).code).toBe(0);
    expect(await listed()).toEqual([]);
    expect(await listed("--all")).toEqual([
      expect.objectContaining({
        id: live[0]!.id,
        status: "revoked",
        revokedReason: "operator",
        revokedAt: expect.any(String),
        ended: { reason: "operator", at: expect.any(String) },
      }),
    ]);
    expect(JSON.parse((await cli(["clients", "show", clientId, "--json"])).stdout).liveGrants).toBe(0);
    const human = await cli(["grants", "list", "--all", "--client", clientId]);
    expect(human.stdout).toMatch(/^ID +USER +CLIENT +STATUS +LASTUSED +ENDED$/m);
    expect(human.stdout).toMatch(/demo:erin .*revoked .* operator at \d{4}-/);

    // A grant that timed out says which timeout ended it, and when.
    const idle = await obtainTokens(t.url, { user: "ida" });
    const past = new Date(Date.now() - 60_000);
    await t.broker.database.db.grant.updateMany({ where: { clientId: idle.client.client_id }, data: { idleExpiresAt: past } });
    const [timedOut] = JSON.parse((await cli(["grants", "list", "--client", idle.client.client_id, "--all", "--json"])).stdout) as Array<{
      status: string;
      ended: { reason: string; at: string };
    }>;
    expect(timedOut).toMatchObject({ status: "expired", ended: { reason: "idle_timeout", at: past.toISOString() } });
  });

  it("every --json output has camelCase keys, one style for scripts", async () => {
    const frank = await obtainTokens(t.url, { user: "frank" });
    const outputs = await Promise.all(
      [["clients", "list"], ["clients", "show", frank.client.client_id], ["grants", "list", "--all"], ["purge"], ["migrate"], ["check"]].map(
        async (args) => [args.join(" "), JSON.parse((await cli([...args, "--json"])).stdout) as unknown] as const,
      ),
    );
    const keys = (value: unknown): string[] =>
      Array.isArray(value) ? value.flatMap(keys) : value && typeof value === "object" ? Object.entries(value).flatMap(([k, v]) => [k, ...keys(v)]) : [];
    for (const [command, output] of outputs) {
      expect([command, keys(output).filter((k) => !/^[a-z][a-zA-Z0-9]*$/.test(k))]).toEqual([command, []]);
      expect([command, keys(output).length]).not.toEqual([command, 0]);
    }
  });

  it("prints a warning as one readable line, never a JSON log record", async () => {
    await obtainTokens(t.url, { user: "gina" });
    // The upstream IdP (here the demo IdP at PUBLIC_URL) cannot be reached to give its token back.
    const res = await cli(["grants", "revoke", "--user", "demo:gina"], { env: { ...env, PUBLIC_URL: `http://127.0.0.1:${await freePort()}` } });
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^Revoked 1 grant\(s\)/);
    expect(res.stderr).toMatch(/^mcp-auth-broker: warning: upstream token revocation failed \(best effort\) \(.+\)\n$/);
  });

  it("audit shows a user's security events, newest last, filtered, with no token or secret", async () => {
    const hana = await obtainTokens(t.url, { user: "hana" });
    expect((await cli(["grants", "revoke", "--user", "demo:hana"])).code).toBe(0);
    const read = async (...args: string[]) => {
      const res = await cli(["audit", "--user", "demo:hana", ...args]);
      expect(res.code).toBe(0);
      return res.stdout;
    };
    const events = JSON.parse(await read("--json")) as Array<{ at: string; type: string; subject: string; clientId: string | null }>;
    const types = events.map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(["login.completed", "token.issued", "grant.revoked"]));
    expect(types.indexOf("grant.revoked")).toBeGreaterThan(types.indexOf("token.issued"));
    expect(events.every((e) => e.subject === "demo:hana")).toBe(true);
    expect([...events].map((e) => e.at).sort()).toEqual(events.map((e) => e.at));

    const logins = await read("--type", "login");
    expect(logins).toMatch(/^AT +TYPE +USER +CLIENT +IP +DETAIL$/m);
    expect(logins).toMatch(/login\.completed +demo:hana/);
    expect(logins).not.toContain("grant.revoked");
    const byClient = JSON.parse(await read("--client", hana.client.client_id, "--type", "grant.revoked", "--json")) as unknown[];
    expect(byClient).toHaveLength(1);
    expect(await read("--since", "2000-01-01", "--limit", "1", "--json")).toContain("grant.revoked");
    expect(await read("--type", "login.refused")).toMatch(/^No audit events since .* matching the filter\.$/m);

    const everything = await read("--since", "1h", "--json");
    for (const secret of [hana.tokens.access_token, hana.tokens.refresh_token]) expect(everything).not.toContain(secret);

    const bad = await cli(["audit", "--since", "yesterday"]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--since "yesterday": give a duration (30m, 1h, 7d, 2w) or an ISO date');
  });

  it("purge removes audit events older than AUDIT_RETENTION_DAYS", async () => {
    const db = t.broker.database.db;
    const old = { type: "sweep.completed", detail: "{}", at: new Date(Date.now() - 3 * 86400_000) };
    await db.auditEvent.createMany({
      data: [
        { id: "audit-old", ...old },
        { id: "audit-recent", ...old, at: new Date(Date.now() - 86400_000 / 2) },
      ],
    });
    expect((await cli(["purge"], { env: { ...env, AUDIT_RETENTION_DAYS: "5" } })).code).toBe(0);
    expect(await db.auditEvent.count({ where: { id: { in: ["audit-old", "audit-recent"] } } })).toBe(2);
    expect((await cli(["purge"], { env: { ...env, AUDIT_RETENTION_DAYS: "2" } })).code).toBe(0);
    expect((await db.auditEvent.findMany({ where: { id: { in: ["audit-old", "audit-recent"] } } })).map((e) => e.id)).toEqual(["audit-recent"]);
  });

  it("clients remove revokes the client's grants and removes it", async () => {
    const carol = await obtainTokens(t.url, { user: "carol" });
    const removed = await cli(["clients", "remove", carol.client.client_id]);
    expect(removed.code).toBe(0);
    expect(removed.stdout).toContain("1 grant(s) revoked");
    await t.broker.services.grants.revocationFeed.poll();
    expect(await mcpStatus(carol.tokens.access_token)).toBe(401);
    expect(await t.broker.database.db.client.count({ where: { id: carol.client.client_id } })).toBe(0);
    // Its tokens too, though no relation cascades to them (prisma/sqlite/schema.prisma).
    expect(await t.broker.database.db.accessToken.count({ where: { clientId: carol.client.client_id } })).toBe(0);
    expect(await t.broker.database.db.refreshToken.count({ where: { clientId: carol.client.client_id } })).toBe(0);
  });

  it("purge sweeps expired rows on demand", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "dave" });
    void tokens;
    await t.broker.database.db.accessToken.updateMany({ data: { expiresAt: new Date(Date.now() - 1000) } });
    const purge = await cli(["purge", "--json"]);
    expect(purge.code).toBe(0);
    const result = JSON.parse(purge.stdout) as Record<string, number>;
    expect(result.accessTokens).toBeGreaterThanOrEqual(1);
    expect(await t.broker.database.db.accessToken.count()).toBe(0);
    const human = await cli(["purge"]);
    expect(human.stdout).toMatch(/accessTokens: +0/);
  });

  it("says what is wrong with the configuration", async () => {
    const res = await cli(["clients", "list"], { env: { ...env, DATABASE_URL: "mysql://x" } });
    expect(res.code).toBe(1);
    expect(res.stderr.trim()).toMatch(/^mcp-auth-broker: configuration error: DATABASE_URL/);
  });

  it("says to migrate first when the database has no schema yet", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-cli-"));
    const res = await cli(["grants", "list"], { cwd: dir, env: { ...env, DATABASE_URL: `file:${path.join(dir, "empty.db")}` } });
    expect(res.code).toBe(1);
    expect(res.stderr).toMatch(/the database is not ready .*run `npx mcp-auth-broker migrate` first/);
  });

  describe("check", () => {
    let gh: GitHubEmulator;
    let mcp: DemoMcpServer;
    let githubEnv: Record<string, string>;
    beforeAll(async () => {
      [gh, mcp] = await Promise.all([startGitHubEmulator({ clientId: "Iv1.check", clientSecret: "check-secret" }), startDemoMcpServer()]);
      githubEnv = {
        ...env,
        ...gh.brokerEnv(),
        ALLOW_ANY_USER: "true",
        MCP_SERVER_URL: mcp.url,
      };
    });
    afterAll(async () => {
      await gh.close();
      await mcp.close();
    });

    it("passes when the database, the GitHub app credentials and the MCP server are all right", async () => {
      const res = await cli(["check"], { env: githubEnv });
      expect(res.code).toBe(0);
      expect(res.stdout).toMatch(/^ok +database +SQLite .* is reachable and up to date$/m);
      expect(res.stdout).toMatch(/^ok +identity provider +GitHub accepts UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET$/m);
      expect(res.stdout).toMatch(
        /^ok +MCP server +http:\/\/127\.0\.0\.1:\d+\/mcp is an MCP server: mcp-auth-broker-demo 1\.0\.0, protocol \d{4}-\d{2}-\d{2}$/m,
      );
      const json = JSON.parse((await cli(["check", "--json"], { env: githubEnv })).stdout) as Array<{ check: string; ok: boolean }>;
      expect(json.map((r) => [r.check, r.ok])).toEqual([
        ["configuration", true],
        ["who may sign in", true],
        // PORT is the running test broker's: check says so rather than failing on it.
        ["listening", true],
        ["database", true],
        ["identity provider", true],
        ["MCP server", true],
      ]);
    });

    it("fails with what to fix: a wrong client secret, an MCP server that is not there; a database not there yet is what npm start creates", async () => {
      const fresh = mkdtempSync(path.join(tmpdir(), "mab-check-"));
      const nobody = await freePort();
      const res = await cli(["check"], {
        env: {
          ...githubEnv,
          UPSTREAM_CLIENT_SECRET: "not-the-secret",
          MCP_SERVER_URL: `http://127.0.0.1:${nobody}/mcp`,
          DATABASE_URL: `file:${path.join(fresh, "new.db")}`,
        },
      });
      expect(res.code).toBe(1);
      expect(res.stdout).toMatch(/^FAIL +identity provider +GitHub: .*incorrect_client_credentials.*check UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET/m);
      expect(res.stdout).toMatch(
        new RegExp(
          `^FAIL +MCP server +cannot reach http://127\\.0\\.0\\.1:${nobody}/mcp: connection refused by 127\\.0\\.0\\.1:${nobody} \\(nothing listens there\\); start the MCP server, or correct the host and port in MCP_SERVER_URL$`,
          "m",
        ),
      );
      expect(res.stdout).toMatch(/^ok +database +SQLite .* does not exist yet: npm start will create it and apply the migrations$/m);
      expect(res.stderr).toContain("2 check(s) failed");
    });

    it("fails for an MCP_SERVER_URL that answers 405 to an MCP initialize, a misspelt variable, and an unreachable database, saying why", async () => {
      // Something listens, but it is not an MCP endpoint: a web server answering 405 to a POST.
      const notMcp = createServer((req, res) => res.writeHead(req.method === "POST" ? 405 : 200).end());
      await new Promise<void>((resolve) => notMcp.listen(0, "127.0.0.1", resolve));
      const closedPort = await freePort();
      try {
        const notMcpUrl = `http://127.0.0.1:${(notMcp.address() as AddressInfo).port}/api`;
        const res = await cli(["check"], {
          env: {
            ...githubEnv,
            MCP_SERVER_URL: notMcpUrl,
            UPSTREAM_PROVIDR: "github",
            ...(postgresAvailable ? { DATABASE_URL: `postgresql://broker:pw@127.0.0.1:${closedPort}/broker` } : {}),
          },
        });
        expect(res.code).toBe(1);
        expect(res.stdout).toContain(
          `FAIL  MCP server         ${notMcpUrl} answered HTTP 405 to a POST: there is no MCP (Streamable HTTP) endpoint at that path; correct the path in MCP_SERVER_URL (often …/mcp)`,
        );
        expect(res.stdout).toMatch(
          /^FAIL +configuration +UPSTREAM_PROVIDR is not a setting of mcp-auth-broker \(did you mean UPSTREAM_PROVIDER\?\): rename or remove it$/m,
        );
        if (postgresAvailable)
          expect(res.stdout).toContain(
            `FAIL  database           cannot use PostgreSQL: connection refused by 127.0.0.1:${closedPort} (nothing listens there); start PostgreSQL, or correct the host and port in DATABASE_URL`,
          );
        expect(res.stderr).toContain(`${postgresAvailable ? 3 : 2} check(s) failed`);
        const { MCP_SERVER_URL: _, ...withoutMcpServer } = githubEnv;
        const unnamed = await cli(["check"], { env: withoutMcpServer });
        expect(unnamed.code).toBe(1);
        expect(unnamed.stdout).toMatch(/^FAIL +configuration +MCP_SERVER_URL: outside demo mode, say which MCP server to protect/m);
      } finally {
        await new Promise((resolve) => notMcp.close(resolve));
      }
    });

    it("reports every configuration problem at once, and writes nothing", async () => {
      const dir = mkdtempSync(path.join(tmpdir(), "mab-check-"));
      const res = await cli(["check"], {
        cwd: dir,
        env: { PORT: "abc", LOG_LEVEL: "loud", UPSTREAM_TIMEOUT_SECONDS: "0", UPSTREAM_CLIENT_SECRET_FILE: path.join(dir, "missing"), UPSTREAM_PROVIDR: "x" },
      });
      expect(res.code).toBe(1);
      const failures = res.stdout.split("\n").filter((l) => l.startsWith("FAIL"));
      expect(failures.map((l) => /^FAIL +configuration +(\w+)/.exec(l)?.[1])).toEqual([
        "UPSTREAM_CLIENT_SECRET_FILE",
        "PORT",
        "UPSTREAM_TIMEOUT_SECONDS",
        "LOG_LEVEL",
        "UPSTREAM_PROVIDR",
      ]);
      expect(res.stderr).toContain("5 check(s) failed");
      // A dry run: no demo key was created where check ran.
      expect(existsSync(path.join(dir, "data"))).toBe(false);
    });

    it("names the cause of an identity provider it cannot reach, and what to change", async () => {
      const closedPort = await freePort();
      const res = await cli(["check"], { env: { ...githubEnv, GITHUB_URL: `http://127.0.0.1:${closedPort}` } });
      expect(res.code).toBe(1);
      expect(res.stdout).toMatch(
        new RegExp(
          `^FAIL +identity provider +GitHub: .*: connection refused by 127\\.0\\.0\\.1:${closedPort} \\(nothing listens there\\); start the identity provider, or correct the host and port in GITHUB_URL / GITHUB_API_URL$`,
          "m",
        ),
      );
    });

    it("in demo mode says the built-in parts are used", async () => {
      const res = await cli(["check"]);
      expect(res.code).toBe(0);
      expect(res.stdout).toContain("demo identity provider");
      expect(res.stdout).toContain("built-in demo MCP server");
      expect(res.stdout).toMatch(/^ok +who may sign in +anyone who can sign in at the identity provider \(ALLOW_ANY_USER\)$/m);
    });

    it("prints the effective access policy, and refuses a configuration without one", async () => {
      const { ALLOW_ANY_USER: _, ...noPolicy } = githubEnv;
      const policy = {
        ...noPolicy,
        ALLOWED_USERS: "octocat,*@acme.com,github:583231",
        ALLOWED_EMAIL_DOMAINS: "@Acme.org",
        ALLOWED_GITHUB_ORGS: "acme,acme/platform",
      };
      const res = await cli(["check"], { env: policy });
      expect(res.stdout).toMatch(
        /^ok +who may sign in +users: octocat, \*@acme\.com, github:583231; verified e-mail domains: acme\.org; GitHub organizations\/teams: acme, acme\/platform$/m,
      );
      const refused = await cli(["check"], { env: noPolicy });
      expect(refused.code).toBe(1);
      expect(refused.stdout).toMatch(
        /^FAIL +configuration +ALLOWED_USERS: nobody is allowed to sign in yet: set ALLOWED_USERS .*ALLOWED_EMAIL_DOMAINS .*ALLOWED_GITHUB_ORGS .*or ALLOW_ANY_USER=true to admit anyone with a GitHub account$/m,
      );
    });
  });
});
