// The real broker process (`npm start`'s command) fronting a stdio server: SIGTERM stops every
// child, one that ignores SIGTERM included (SIGKILL after the grace), and leaves no process behind.
// Children are found by pid, as the fixture reports its own.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { alive, bearerFor, fixtureEnv, whoami } from "./stdio-support.ts";

describe("broker shutdown with stdio children", () => {
  let dir: string;
  let broker: BrokerProcess | undefined;
  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "mab-stdio-shutdown-"));
  });
  afterAll(async () => {
    await broker?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("SIGTERM leaves no child process, even one that ignores SIGTERM", async () => {
    broker = await startBrokerProcess(dir, { DATABASE_URL: `file:${path.join(dir, "broker.db")}`, ...fixtureEnv({ MCP_SERVER_ENV: "IGNORE_SIGTERM=1" }) });
    const pids: number[] = [];
    const clients: Client[] = [];
    for (const user of ["kim", "lee"]) {
      const auth = await bearerFor(broker.url, user);
      const client = new Client({ name: user, version: "1" });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: auth } }));
      clients.push(client);
      pids.push((await whoami(client)).pid);
    }
    expect(pids.every(alive)).toBe(true);

    broker.child.kill("SIGTERM");
    const exit = await broker.exited;
    expect(exit.code).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
    for (const client of clients) await client.close().catch(() => undefined);
  }, 30_000);
});
