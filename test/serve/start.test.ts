// `npm start` as a new operator meets it: the mistakes it can see are said at start, once, with the
// setting to change, and the broker starts anyway when they need not stop it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { freePort } from "../support/start-broker.ts";
import { projectRoot, runToEnd, startServer, waitForOutput } from "../support/spawn.ts";
import { makeUnwritable, mechanism } from "../support/unwritable.ts";
import { serve } from "../../src/serve.ts";
import { DEMO_TOOLS } from "../../src/demo/tools.ts";
import { startDemoMcpServer } from "../../src/demo/mcp-server.ts";
import { initializeAs } from "../support/mcp-probe.ts";

const tmp = () => mkdtempSync(path.join(tmpdir(), "mab-start-"));

/** Resolves once the process's output so far (or to come) matches `pattern`. */
function outputMatching(child: ChildProcess, output: () => string, pattern: RegExp): Promise<string> {
  return new Promise((resolve, reject) => {
    const look = () => {
      if (!pattern.test(output())) return;
      child.stdout?.off("data", onData);
      child.stderr?.off("data", onData);
      child.off("exit", onExit);
      resolve(output());
    };
    const onData = () => setImmediate(look);
    const onExit = () => reject(new Error(`the process exited before printing ${pattern}:\n${output()}`));
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", onExit);
    look();
  });
}

let gh: GitHubEmulator;
beforeAll(async () => {
  gh = await startGitHubEmulator({ clientId: "Iv1.start", clientSecret: "the-real-secret" });
});
afterAll(async () => gh.close());

describe("start-up probes outside demo mode", () => {
  let broker: BrokerProcess | undefined;
  afterAll(async () => broker?.kill());

  it("fake GitHub credentials and an MCP_SERVER_URL at a dead port: the broker starts, and says both once, with the setting to change", async () => {
    const deadPort = await freePort();
    broker = await startBrokerProcess(tmp(), {
      UPSTREAM_PROVIDER: "github",
      UPSTREAM_CLIENT_ID: "Iv1.start",
      UPSTREAM_CLIENT_SECRET: "a-made-up-secret",
      GITHUB_URL: gh.url,
      GITHUB_API_URL: gh.apiUrl,
      ALLOW_ANY_USER: "true",
      MCP_SERVER_URL: `http://127.0.0.1:${deadPort}/mcp`,
    });
    const output = await outputMatching(
      broker.child,
      broker.output,
      /identity provider check failed[\s\S]*MCP server check failed|MCP server check failed[\s\S]*identity provider check failed/,
    );
    expect(output).toMatch(
      /WARN.*identity provider check failed at start: GitHub: .*incorrect_client_credentials.*check UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET/,
    );
    expect(output).toContain(
      `MCP server check failed at start: cannot reach http://127.0.0.1:${deadPort}/mcp: connection refused by 127.0.0.1:${deadPort} (nothing listens there); start the MCP server, or correct the host and port in MCP_SERVER_URL`,
    );
    expect(output.match(/check failed at start/g)).toHaveLength(2);
    expect((await fetch(`${broker.url}/healthz`)).status).toBe(200);
  });

  it("a setup that is right: no warning", async () => {
    const mcp = await startDemoMcpServer();
    const right = await startBrokerProcess(tmp(), {
      UPSTREAM_PROVIDER: "github",
      UPSTREAM_CLIENT_ID: "Iv1.start",
      UPSTREAM_CLIENT_SECRET: "the-real-secret",
      GITHUB_URL: gh.url,
      GITHUB_API_URL: gh.apiUrl,
      ALLOW_ANY_USER: "true",
      MCP_SERVER_URL: mcp.url,
      LOG_LEVEL: "debug",
    });
    try {
      const output = await outputMatching(
        right.child,
        right.output,
        /identity provider check passed[\s\S]*MCP server check passed|MCP server check passed[\s\S]*identity provider check passed/,
      );
      expect(output).toMatch(/MCP server check passed at start: http:\/\/127\.0\.0\.1:\d+\/mcp is an MCP server: mcp-auth-broker-demo/);
      expect(gh.count("POST /login/oauth/access_token")).toBeGreaterThan(0);
      expect(right.output()).not.toMatch(/check failed/);
    } finally {
      await right.kill();
      await mcp.close();
    }
  });
});

describe("PUBLIC_URL on a LAN address without TLS", () => {
  it("is refused, naming INSECURE_PUBLIC_URL and the reverse proxy; with INSECURE_PUBLIC_URL=true it starts and warns", async () => {
    const port = await freePort();
    const lan = { PUBLIC_URL: `http://192.168.1.10:${port}`, PORT: String(port), HOST: "127.0.0.1" };
    const stderr: string[] = [];
    const refused = await serve({ cwd: tmp(), env: lan, out: () => undefined, err: (text) => stderr.push(text) });
    expect(refused).toBe(1);
    expect(stderr.join("")).toMatch(
      /PUBLIC_URL: expected an https:\/\/ URL .*put a TLS reverse proxy in front \(README: "Behind a reverse proxy"\), or set INSECURE_PUBLIC_URL=true/,
    );

    const broker = await startBrokerProcess(tmp(), { ...lan, INSECURE_PUBLIC_URL: "true" });
    try {
      const output = await outputMatching(broker.child, broker.output, /INSECURE_PUBLIC_URL=true/);
      expect(output).toMatch(/WARN.*INSECURE_PUBLIC_URL=true: PUBLIC_URL http:\/\/192\.168\.1\.10:\d+ is plain http on a network address/);
      const metadata = (await (await fetch(`http://127.0.0.1:${port}/.well-known/oauth-authorization-server`)).json()) as { issuer: string };
      expect(metadata.issuer).toBe(`http://192.168.1.10:${port}`);
    } finally {
      await broker.kill();
    }
  });
});

describe("start-up failures said before anything is written", () => {
  it("a port in use is said before the database is created and migrated", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as AddressInfo).port;
    const dir = tmp();
    const file = path.join(dir, "fresh.db");
    try {
      const result = await runToEnd(
        startServer({ cwd: dir, env: { PORT: String(port), HOST: "127.0.0.1", DATABASE_URL: `file:${file}`, SECRET_KEY: randomBytes(32).toString("base64") } }),
      );
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`mcp-auth-broker: port ${port} on 127.0.0.1 is already in use; set PORT to a free port\n`);
      expect(existsSync(file)).toBe(false);
    } finally {
      taken.close();
    }
  });

  (mechanism ? it : it.skip)("demo mode in a folder it cannot write: one line naming the folder and what to do", async () => {
    const dir = tmp();
    const restore = makeUnwritable([dir]);
    try {
      const result = await runToEnd(startServer({ cwd: dir, env: { PORT: "0" } }));
      expect(result.code).toBe(1);
      expect(result.stderr).toMatch(
        new RegExp(
          `^mcp-auth-broker: failed to start: cannot create or write the data folder ${path.join(dir, "data")} \\(E(ACCES|PERM)\\), where demo mode keeps its generated key and its database: start the broker in a folder (user|uid) \\S+ can write, or create \\S+ writable for that user\\n$`,
        ),
      );
    } finally {
      restore();
    }
  });
});

describe("the demo banner", () => {
  it("names the demo MCP server's tools, all of them, and what the MCP Inspector needs", async () => {
    const mcp = await startDemoMcpServer();
    try {
      const listed = await fetch(mcp.url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify(initializeAs({ name: "t", version: "1" })),
      });
      const session = listed.headers.get("mcp-session-id")!;
      await listed.text();
      const tools = await fetch(mcp.url, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          "mcp-session-id": session,
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
      });
      const names = (/"tools":(\[.*\])/.exec(await tools.text())?.[1] ?? "[]").match(/"name":"([^"]+)"/g)!.map((m) => m.slice(8, -1));
      expect([...names].sort()).toEqual([...DEMO_TOOLS].sort());
    } finally {
      await mcp.close();
    }
    const dir = tmp();
    const child = startServer({ cwd: dir, env: { PORT: "0", LOG_LEVEL: "warn" } });
    const finished = runToEnd(child, 30_000);
    try {
      const banner = await waitForOutput(child, /Connect\./, 30_000);
      expect(banner).toContain(`in front of a demo MCP server (${DEMO_TOOLS.join(", ")}).`);
      // The README's Quickstart lists the same tools.
      const quickstart = readFileSync(path.join(projectRoot, "README.md"), "utf8").split("## GitHub login")[0]!.replace(/\s+/g, " ");
      expect(quickstart).toContain(
        `the tools ${DEMO_TOOLS.slice(0, -1)
          .map((n) => `\`${n}\``)
          .join(", ")} and \`${DEMO_TOOLS.at(-1)}\``,
      );
      const [major, minor] = process.versions.node.split(".").map(Number) as [number, number];
      if (major < 22 || (major === 22 && minor < 19)) expect(banner).toContain("Try it with the MCP Inspector (it needs Node.js 22.19 or newer;");
    } finally {
      child.kill("SIGTERM");
      await finished;
    }
  });
});
