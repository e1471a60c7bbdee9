// `npm run bench:instructions`: the instructions one refresh costs the broker, thread by thread,
// counted by valgrind's callgrind. CPU time on a shared 2-core machine moves by a tenth between runs
// of the same code, so a change of a few percent cannot show in `npm run bench`; an instruction
// count moves by about 2% between runs. The broker runs dist/ under callgrind, row (d)'s 20 refresh
// chains warm it up, then the counters are zeroed, 1,000 refreshes run, and the counts are dumped.
//
// What the count leaves out: the kernel's work in system calls (socket reads and writes, the WAL's
// writes and fsync), and the cost of a cache miss. And valgrind runs one thread at a time, so a
// group commit gathers more refreshes than at full speed: the writer thread's figure per refresh is
// lower than it would be there. Compare counts with counts, never with CPU time.
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startGitHubEmulator } from "../test/support/github-emulator.ts";
import { ensureBuilt } from "../test/support/global-setup.ts";
import { freePort } from "../test/support/start-broker.ts";
import { brokerEnv, startProcess, stop } from "./processes.ts";

/** Timeouts that hold when the broker runs many times slower than at full speed. */
const PATIENT = { UPSTREAM_TIMEOUT_SECONDS: "120", PROXY_TIMEOUT_SECONDS: "600" };
const REFRESHES_PER_CHAIN = 50;

function valgrindVersion(): string | undefined {
  try {
    return execFileSync("valgrind", ["--version"], { encoding: "utf8" }).trim();
  } catch {
    return undefined;
  }
}

/** Which thread a callgrind file counted: the main thread is the first; the writer thread runs a Node Worker. */
function threadKind(file: string, text: string): "event loop" | "writer thread" | "helper threads" {
  if (file.endsWith("-01")) return "event loop";
  return text.includes("node::worker::Worker::Run") ? "writer thread" : "helper threads";
}

/** Instructions of each kind of thread in callgrind's dump number `dump` in `dir`. */
function countsOfDump(dir: string, dump: number): Map<string, number> {
  const counts = new Map<string, number>();
  for (const file of readdirSync(dir).filter((f) => new RegExp(`^callgrind\\.out\\.${dump}-\\d+$`).test(f))) {
    const text = readFileSync(path.join(dir, file), "utf8");
    const total = Number(/^summary: (\d+)/m.exec(text)?.[1] ?? 0);
    const kind = threadKind(file, text);
    counts.set(kind, (counts.get(kind) ?? 0) + total);
  }
  return counts;
}

async function main(): Promise<void> {
  const version = valgrindVersion();
  if (!version) {
    console.log("bench:instructions skipped: valgrind is not installed (Debian: apt-get install valgrind).");
    return;
  }
  // Read by token-grants.ts when it loads: one measured round of 20 chains × 50 refreshes.
  process.env.BENCH_ROUNDS = "1";
  process.env.BENCH_REFRESHES_PER_CHAIN = String(REFRESHES_PER_CHAIN);
  // V8 still compiles optimized code after the CPU time per round has settled under valgrind: the
  // counts (the helper threads' most) moved by a third with the usual 2 rounds.
  process.env.BENCH_WARM_UP_ROUNDS = "6";
  const { brokerRefreshRate } = await import("./token-grants.ts");
  ensureBuilt();
  const dir = mkdtempSync(path.join(tmpdir(), "mab-instructions-"));
  const gh = (await startGitHubEmulator({ clientId: "Iv1.bench", clientSecret: "bench-secret" })).keepIdleConnections(600_000);
  gh.autoApprove = "bench";
  const port = await freePort();
  const databaseUrl = `file:${path.join(dir, "broker.db")}`;
  const callgrind = [
    "valgrind",
    "--quiet",
    "--tool=callgrind",
    "--separate-threads=yes",
    "--smc-check=all-non-file",
    `--callgrind-out-file=${path.join(dir, "callgrind.out")}`,
  ];
  const env = brokerEnv({
    port,
    databaseUrl,
    secretKey: randomBytes(32).toString("base64"),
    github: gh,
    // Nothing here calls an MCP server: only the token endpoint is measured.
    mcpServerUrl: "http://127.0.0.1:9/mcp",
    recheck: "30",
  });
  console.log(`mcp-auth-broker instructions per refresh (${version}, node ${process.version}); about 5 minutes`);
  const { child } = await startProcess(["dist/main.js"], { ...env, ...PATIENT }, /mcp-auth-broker is running/, false, callgrind);
  try {
    let zeroed = false;
    const measured = await brokerRefreshRate({ name: "broker", url: `http://127.0.0.1:${port}`, pid: child.pid }, databaseUrl, dir, async () => {
      const pid = String(child.pid);
      if (!zeroed) {
        zeroed = true;
        execFileSync("callgrind_control", ["--zero", pid], { stdio: "ignore" });
        return 0;
      }
      execFileSync("callgrind_control", ["--dump=measured refreshes", pid], { stdio: "ignore" });
      return [...countsOfDump(dir, 1).values()].reduce((a, b) => a + b, 0);
    });
    const refreshes = 20 * REFRESHES_PER_CHAIN;
    const counts = countsOfDump(dir, 1);
    const k = (n: number) => `${((n ?? 0) / refreshes / 1000).toFixed(0)}k`;
    const rows: Array<[string, string]> = [
      ["(n) instructions per refresh, all threads", `${k(measured.counterPerRequest! * refreshes)} over ${refreshes} refreshes after warm-up`],
      ...["event loop", "writer thread", "helper threads"].map((kind): [string, string] => [`    ${kind}`, k(counts.get(kind) ?? 0)]),
    ];
    const width = Math.max(...rows.map(([label]) => label.length)) + 2;
    for (const [label, value] of rows) console.log(label.padEnd(width) + value);
    console.log("    (user space only; the event loop and the writer thread move by about 2% between runs, V8's helper threads by much more)");
  } finally {
    await stop(child);
    await gh.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
process.exit(0);
