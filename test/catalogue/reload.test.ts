// Reloading the configuration file while the broker runs: a server added is served at once; a
// server whose access narrows stops admitting the users it no longer names at their next request
// (their cached validations are decided again); a server removed answers 404 and its grants end;
// a server that did not change keeps its sessions. Through the real process: SIGHUP sent by
// `mcp-auth-broker reload`, a broken file refused with its line while the old servers stay.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { loadConfig } from "../../src/config/load.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { INITIALIZE_MESSAGE, mcpPostTo } from "../support/mcp-probe.ts";
import { runCliCaptured } from "../support/cli-in-process.ts";
import { until } from "../support/wait.ts";

let mcp: DemoMcpServer;
let dir: string;

const yaml = (servers: ReadonlyArray<{ name: string; access?: string }>) =>
  `servers:\n${servers.map((s) => `  - name: ${s.name}\n    url: ${mcp.url}\n${s.access ? `    access: ${s.access}\n` : ""}`).join("")}`;

beforeAll(async () => {
  mcp = await startDemoMcpServer();
  dir = mkdtempSync(path.join(tmpdir(), "mab-reload-"));
});
afterAll(async () => {
  await mcp?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("Broker.reload", () => {
  let t: TestBroker;
  const file = () => path.join(dir, "in-process.yaml");
  const at = (name: string) => `${t.url}/mcp/${name}`;
  /** The catalogue the file now describes, read as the running broker reads it. */
  const reread = () =>
    loadConfig({ PUBLIC_URL: t.url, BROKER_CONFIG: file(), DATABASE_URL: t.broker.config.databaseUrl, SECRET_KEY: "0".repeat(64) }, dir).catalogue;

  beforeAll(async () => {
    writeFileSync(file(), yaml([{ name: "alpha" }, { name: "beta" }]));
    t = await startBroker({ BROKER_CONFIG: file() });
  });
  afterAll(async () => t?.stop());

  it("serves an added server, keeps an unchanged server's sessions, narrows access at the next request, and ends a removed server's grants", async () => {
    const alice = await obtainTokens(t.url, { user: "alice", resource: at("alpha") });
    const bob = await obtainTokens(t.url, { user: "bob", resource: at("alpha") });
    const carol = await obtainTokens(t.url, { user: "carol", resource: at("beta") });
    const opened = await mcpPostTo(at("alpha"), alice.tokens.access_token, INITIALIZE_MESSAGE);
    const session = opened.headers.get("mcp-session-id")!;
    expect((await mcpPostTo(at("alpha"), bob.tokens.access_token, INITIALIZE_MESSAGE)).status).toBe(200);
    expect((await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp/gamma`)).status).toBe(404);

    // alpha unchanged; beta removed; gamma added.
    writeFileSync(file(), yaml([{ name: "alpha" }, { name: "gamma" }]));
    const change = await t.broker.reload(reread());
    expect(change).toMatchObject({ added: ["gamma"], removed: ["beta"], unchanged: ["alpha"], changed: [] });
    expect((await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp/gamma`)).status).toBe(200);
    expect(await (await fetch(`${t.url}/`)).text()).toContain(at("gamma"));
    // The unchanged server's session goes on.
    const ping = await mcpPostTo(
      at("alpha"),
      alice.tokens.access_token,
      { jsonrpc: "2.0", id: 5, method: "ping" },
      { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" },
    );
    expect(ping.status).toBe(200);
    // The removed server: nothing at its path, and its grants ended.
    expect((await mcpPostTo(at("beta"), carol.tokens.access_token, INITIALIZE_MESSAGE)).status).toBe(404);
    const carolGrant = await t.broker.database.db.grant.findFirstOrThrow({ where: { clientId: carol.client.client_id } });
    expect(carolGrant.revokedReason).toBe("server_removed");

    // alpha narrowed to alice: bob's token, validated and cached before, is refused at once.
    writeFileSync(file(), yaml([{ name: "alpha", access: "{ users: [alice] }" }, { name: "gamma" }]));
    expect(await t.broker.reload(reread())).toMatchObject({ changed: ["alpha"], unchanged: ["gamma"] });
    expect((await mcpPostTo(at("alpha"), bob.tokens.access_token, INITIALIZE_MESSAGE)).status).toBe(401);
    expect((await mcpPostTo(at("alpha"), alice.tokens.access_token, INITIALIZE_MESSAGE)).status).toBe(200);
  });
});

describe("mcp-auth-broker reload, to the running process", () => {
  let broker: BrokerProcess;
  const cwd = () => path.join(dir, "process");
  const file = () => path.join(cwd(), "broker.yaml");
  const env = () => ({ BROKER_CONFIG: "broker.yaml", SECRET_KEY: "1".repeat(64), PUBLIC_URL: broker.url, PORT: new URL(broker.url).port });

  beforeAll(async () => {
    mkdirSync(cwd(), { recursive: true });
    writeFileSync(file(), yaml([{ name: "alpha" }]));
    broker = await startBrokerProcess(cwd(), { BROKER_CONFIG: "broker.yaml", SECRET_KEY: "1".repeat(64), LOG_LEVEL: "info", LOG_FORMAT: "json" });
  });
  afterAll(async () => broker?.kill());

  const reload = async () => {
    const { code, stdout, stderr } = await runCliCaptured(["reload"], { cwd: cwd(), env: env() });
    return { code, text: stdout + stderr };
  };

  it("refuses a broken file with its line, keeping the servers; serves the corrected file", async () => {
    writeFileSync(file(), `${yaml([{ name: "alpha" }])}  - name: beta\n    url: not a url\n`);
    // The command checks the file itself first: nothing is signalled.
    const refused = await reload();
    expect(refused.code).toBe(1);
    expect(refused.text).toContain("broker.yaml:5");
    expect((await fetch(`${broker.url}/.well-known/oauth-protected-resource/mcp/alpha`)).status).toBe(200);
    // Signalled anyway (kill -HUP): the broker refuses it with the line, and keeps serving alpha.
    process.kill(broker.child.pid!, "SIGHUP");
    await until(() => broker.output().includes("reload refused"), "the broker's refusal line");
    const refusal = broker
      .output()
      .split("\n")
      .find((line) => line.includes("reload refused"))!;
    expect(refusal).toContain("broker.yaml:5:10: servers[1].url");
    expect((await fetch(`${broker.url}/.well-known/oauth-protected-resource/mcp/alpha`)).status).toBe(200);

    writeFileSync(file(), yaml([{ name: "alpha" }, { name: "beta" }]));
    const sent = await reload();
    expect(sent.code).toBe(0);
    expect(sent.text).toContain(`asked the broker (pid ${broker.child.pid})`);
    await until(() => broker.output().includes("configuration reloaded"), "the broker's reload line");
    expect((await fetch(`${broker.url}/.well-known/oauth-protected-resource/mcp/beta`)).status).toBe(200);
  });
});
