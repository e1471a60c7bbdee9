// `mcp-auth-broker check` as a new operator uses it: run before `npm start` (the README's order), on
// a configuration with several mistakes at once, against MCP_SERVER_URLs that are not MCP servers or
// not there. One round lists every problem; exit 0 only when `npm start` would start and work.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { runCliCaptured, type CliResult } from "../support/cli-in-process.ts";
import { startGitHubEmulator, type GitHubEmulator } from "../support/github-emulator.ts";
import { freePort } from "../support/start-broker.ts";
import { makeUnwritable, mechanism } from "../support/unwritable.ts";

const tmp = () => mkdtempSync(path.join(tmpdir(), "mab-check-"));

const check = (env: Record<string, string>, cwd = tmp()): Promise<CliResult> => runCliCaptured(["check"], { cwd, env });

const lines = (out: string, status: "ok" | "FAIL") => out.split("\n").filter((l) => l.startsWith(status === "ok" ? "ok  " : "FAIL"));

/** A web server that is not an MCP server: `answer` for every request. */
async function webServer(answer: (res: import("node:http").ServerResponse) => void): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    req.resume();
    answer(res);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

let gh: GitHubEmulator;
beforeAll(async () => {
  gh = await startGitHubEmulator({ clientId: "Iv1.first-hour", clientSecret: "the-real-secret" });
});
afterAll(async () => gh.close());

describe("check before the first npm start", () => {
  it("in an empty folder (the README's order: check, then npm start) passes, saying npm start creates the database", async () => {
    const dir = tmp();
    const res = await check({ PORT: String(await freePort()) }, dir);
    expect(lines(res.stdout, "FAIL")).toEqual([]);
    expect(res.code).toBe(0);
    expect(res.stdout).toMatch(/^ok +database +SQLite \(file:\.\/data\/broker\.db\) does not exist yet: npm start will create it and apply the migrations$/m);
    // Still a dry run: nothing was created.
    expect(existsSync(path.join(dir, "data"))).toBe(false);
  });

  it("reports pending migrations as what npm start will do, not as a failure", async () => {
    const dir = tmp();
    mkdirSync(path.join(dir, "data"));
    // A database file with no migration applied yet.
    writeFileSync(path.join(dir, "data/broker.db"), "");
    const res = await check({ PORT: String(await freePort()) }, dir);
    expect(res.stdout).toMatch(/^ok +database +SQLite .* is reachable; npm start will apply \d+ pending migration\(s\) first \(\d{14}_init, /m);
    expect(res.code).toBe(0);
  });
});

describe("check lists every problem in one round", () => {
  it("GitHub with a wrong secret, no SECRET_KEY, no access policy, no MCP server: all four at once, and no ok line contradicting them", async () => {
    const res = await check({
      PORT: String(await freePort()),
      UPSTREAM_PROVIDER: "github",
      UPSTREAM_CLIENT_ID: "Iv1.first-hour",
      UPSTREAM_CLIENT_SECRET: "a-made-up-secret",
      GITHUB_URL: gh.url,
      GITHUB_API_URL: gh.apiUrl,
    });
    expect(res.code).toBe(1);
    const failed = lines(res.stdout, "FAIL").map((l) => /^FAIL +(.+?) {2,}(\S+)/.exec(l)!.slice(1).join(" "));
    expect(failed).toEqual(["configuration SECRET_KEY:", "configuration ALLOWED_USERS:", "configuration MCP_SERVER_URL:", "identity provider GitHub:"]);
    expect(res.stdout).toMatch(/^FAIL +identity provider +GitHub: .*incorrect_client_credentials/m);
    // Not "ok MCP server MCP_SERVER_URL is not set: the built-in demo MCP server is used", nor "ok configuration".
    expect(lines(res.stdout, "ok").map((l) => /^ok +(.+?) {2,}/.exec(l)![1])).toEqual(["listening", "database"]);
    expect(res.stderr).toBe("mcp-auth-broker: 4 check(s) failed\n");
  });
});

describe("check on an MCP_SERVER_URL that is not an MCP server", () => {
  it.each([
    [
      "a web server answering 501 to a POST (python -m http.server)",
      (res: import("node:http").ServerResponse) => res.writeHead(501, { "content-type": "text/html" }).end("<h1>Error response</h1><p>Error code: 501</p>"),
      "answered HTTP 501 (Not Implemented): it is not an MCP endpoint; is the path in MCP_SERVER_URL right (often …/mcp)?",
    ],
    [
      "a web page",
      (res: import("node:http").ServerResponse) =>
        res.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end("<!doctype html><title>Welcome</title>"),
      "answered an HTML page (HTTP 200): it is not an MCP endpoint; is the path in MCP_SERVER_URL right (often …/mcp)?",
    ],
  ])("%s", async (_, answer, expected) => {
    const web = await webServer(answer);
    try {
      const res = await check({ PORT: String(await freePort()), MCP_SERVER_URL: web.url });
      expect(res.code).toBe(1);
      expect(lines(res.stdout, "FAIL")).toEqual([`FAIL  MCP server         ${web.url} ${expected}`]);
    } finally {
      await web.close();
    }
  });

  it("names the cause of every MCP server it cannot reach: refused (port 9 too), DNS, TLS, timeout", async () => {
    const plain = await webServer((res) => res.end("{}"));
    // Accepts the connection and never answers.
    const silent = createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const silentUrl = `http://127.0.0.1:${(silent.address() as AddressInfo).port}/mcp`;
    const tlsUrl = plain.url.replace("http:", "https:");
    try {
      const cases: Array<[string, Record<string, string>, string]> = [
        [
          "http://127.0.0.1:9/mcp",
          {},
          "connection refused by 127.0.0.1:9 (nothing listens there); start the MCP server, or correct the host and port in MCP_SERVER_URL",
        ],
        ["http://mcp.invalid/mcp", {}, "DNS: the host name mcp.invalid does not resolve"],
        [
          tlsUrl,
          {},
          "TLS: the server does not answer in TLS there (ERR_SSL_WRONG_VERSION_NUMBER); if the MCP server speaks plain HTTP on that port, write http:// in MCP_SERVER_URL",
        ],
        [silentUrl, { PROXY_TIMEOUT_SECONDS: "1" }, "timeout: the MCP server did not answer in time"],
      ];
      for (const [url, extra, cause] of cases) {
        const res = await check({ PORT: String(await freePort()), MCP_SERVER_URL: url, ...extra });
        const [line] = lines(res.stdout, "FAIL");
        expect([url, line]).toEqual([url, expect.stringContaining(`FAIL  MCP server         cannot reach ${url}: ${cause}`)]);
      }
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
      await plain.close();
    }
  });
});

describe("check exits 0 only when npm start would succeed", () => {
  it("fails on a port another program holds, naming PORT", async () => {
    const other = await webServer((res) => res.writeHead(404).end());
    const port = new URL(other.url).port;
    try {
      const res = await check({ PORT: port });
      expect(res.code).toBe(1);
      expect(lines(res.stdout, "FAIL")).toEqual([`FAIL  listening          port ${port} on 127.0.0.1 is already in use; set PORT to a free port`]);
    } finally {
      await other.close();
    }
  });

  (mechanism ? it : it.skip)("fails in demo mode when the working folder cannot hold the data folder", async () => {
    const dir = tmp();
    const restore = makeUnwritable([dir]);
    try {
      const res = await check({ PORT: String(await freePort()) }, dir);
      expect(res.code).toBe(1);
      expect(res.stdout).toMatch(
        new RegExp(
          `^FAIL +data folder +cannot create or write the data folder ${path.join(dir, "data")} \\(E(ACCES|PERM)\\), where demo mode keeps its generated key`,
          "m",
        ),
      );
    } finally {
      restore();
    }
  });
});
