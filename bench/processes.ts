// The benchmark's child processes: started with node itself (not the tsx wrapper) so that the pid
// is the server's own for its CPU figures. A .js script (the broker's dist/main.js, as `npm start`
// runs it) runs as is; a .ts one through tsx's loader.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

/** BENCH_PROFILE_DIR=/tmp/prof: the broker processes write V8 CPU profiles there (open in Chrome DevTools). */
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR;
// Made now: rows write their own profiles there too (row (s)), before any profiled process has exited.
if (PROFILE_DIR) mkdirSync(PROFILE_DIR, { recursive: true });

/** `args`: node's flags, if any, then the script and its arguments; `wrapper`: a command that runs node itself, with its arguments (valgrind: bench/instructions.ts). */
export function startProcess(
  args: string[],
  env: Record<string, string>,
  ready: RegExp,
  profile = false,
  wrapper: readonly string[] = [],
): Promise<{ child: ChildProcess; match: RegExpExecArray }> {
  const profiling = profile && PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${PROFILE_DIR}`] : [];
  // Node's own flags may come before the script (`--single-threaded-gc`, bench/machine-pauses.ts).
  const scriptAt = args.findIndex((a) => !a.startsWith("--"));
  const flags = scriptAt > 0 ? args.slice(0, scriptAt) : [];
  const script = args.slice(flags.length);
  const loader = script[0]?.endsWith(".ts") ? ["--import", "tsx"] : [];
  const [command, ...commandArgs] = [...wrapper, process.execPath, ...profiling, ...flags, ...loader, ...script];
  const child = spawn(command!, commandArgs, {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout!.on("data", (d: Buffer) => {
      out += d.toString();
      const match = ready.exec(out);
      if (match) resolve({ child, match });
    });
    child.once("exit", (code) => reject(new Error(`${args.join(" ")} exited with ${code}: ${out}`)));
  });
}

/** A bare proxy (bench/bare-proxy.ts: Koa + undici, or `plain` node:http + undici) in its own process, in front of `serverUrl`. */
export async function startBareProxy(
  serverUrl: string,
  kind: "koa" | "plain" = "koa",
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; url: string }> {
  const { child, match } = await startProcess(["bench/bare-proxy.ts", serverUrl, ...(kind === "plain" ? ["plain"] : [])], env, /BARE_PROXY_URL (\S+)/);
  return { child, url: match[1]! };
}

export async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

const CLOCK_TICKS = 100;

/**
 * CPU time (user + system) a process has used so far, in milliseconds (Linux /proc); with
 * `mainThread`, only its main thread's: the event loop's, without libuv's and V8's helper threads.
 */
export function cpuMs(pid: number | undefined, mainThread = false): number {
  try {
    const fields = readFileSync(mainThread ? `/proc/${pid}/task/${pid}/stat` : `/proc/${pid}/stat`, "utf8")
      .split(") ")[1]!
      .split(" ");
    // utime and stime are fields 14 and 15 of stat; [1] starts at field 3.
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return NaN;
  }
}

/**
 * A process's main thread so far, from the scheduler (Linux /proc/<pid>/task/<pid>/schedstat), in
 * microseconds: the time it ran, and the time it was ready to run but waited for a core. Exact to
 * the nanosecond, unlike stat's 10 ms ticks.
 */
export function mainThreadSchedule(pid: number | undefined): { runUs: number; waitUs: number } {
  try {
    const [run, wait] = readFileSync(`/proc/${pid}/task/${pid}/schedstat`, "utf8").trim().split(" ").map(Number);
    return { runUs: run! / 1000, waitUs: wait! / 1000 };
  } catch {
    return { runUs: NaN, waitUs: NaN };
  }
}

/** The bearer token the bench's brokers require for /metrics on their main listener (METRICS_TOKEN). */
export const METRICS_TOKEN = "bench-metrics-token";

/** Where a bench broker signs users in and what it fronts. */
export interface BrokerSetting {
  readonly port: number;
  readonly databaseUrl: string;
  readonly secretKey: string;
  /** The GitHub emulator (test/support/github-emulator.ts), client Iv1.bench. */
  readonly github: { readonly url: string; readonly apiUrl: string };
  readonly mcpServerUrl: string;
  /** UPSTREAM_RECHECK_SECONDS. */
  readonly recheck: string;
}

/** The environment every bench broker runs with (bench/run.ts, bench/instructions.ts). */
export function brokerEnv(s: BrokerSetting): Record<string, string> {
  return {
    PORT: String(s.port),
    PUBLIC_URL: `http://127.0.0.1:${s.port}`,
    DATABASE_URL: s.databaseUrl,
    SECRET_KEY: s.secretKey,
    UPSTREAM_PROVIDER: "github",
    ALLOW_ANY_USER: "true",
    UPSTREAM_CLIENT_ID: "Iv1.bench",
    UPSTREAM_CLIENT_SECRET: "bench-secret",
    GITHUB_URL: s.github.url,
    GITHUB_API_URL: s.github.apiUrl,
    MCP_SERVER_URL: s.mcpServerUrl,
    UPSTREAM_RECHECK_SECONDS: s.recheck,
    LOG_LEVEL: "warn",
    // The text banner, whatever the log level (as JSON it is an info line, below warn).
    LOG_FORMAT: "pretty",
    METRICS_TOKEN,
  };
}

/** A broker's /metrics text (Prometheus exposition). */
export async function metricsText(brokerUrl: string): Promise<string> {
  const res = await fetch(`${brokerUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  if (res.status !== 200) throw new Error(`/metrics answered ${res.status}`);
  return res.text();
}

/**
 * The whole machine's CPU time so far, busy and idle, in milliseconds over all cores (Linux
 * /proc/stat): what every process, the database server's included, used.
 */
export function machineCpuMs(): { busy: number; idle: number } {
  const ticks = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1, 9).map(Number);
  const idle = ticks[3]! + ticks[4]!;
  const total = ticks.reduce((a, b) => a + b, 0);
  return { busy: ((total - idle) * 1000) / CLOCK_TICKS, idle: (idle * 1000) / CLOCK_TICKS };
}

/** A process's limit on open file descriptors (soft, hard), from /proc/<pid>/limits; Infinity when unlimited. */
export function openFileLimit(pid: number | undefined): { soft: number; hard: number } {
  const line = /^Max open files\s+(\S+)\s+(\S+)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"));
  const value = (v: string | undefined) => (v === undefined || v === "unlimited" ? Infinity : Number(v));
  return { soft: value(line?.[1]), hard: value(line?.[2]) };
}

/**
 * Raises a process's soft limit on open file descriptors to its hard limit (what an unprivileged
 * process may do, here with util-linux's prlimit, since Node has no setrlimit); returns the limit
 * in force afterwards, whether or not prlimit was there to raise it.
 */
export function raiseOpenFileLimit(pid: number | undefined): { soft: number; hard: number } {
  const limit = openFileLimit(pid);
  if (limit.soft < limit.hard && Number.isFinite(limit.hard)) {
    try {
      execFileSync("prlimit", [`--pid=${pid}`, `--nofile=${limit.hard}:${limit.hard}`], { stdio: "ignore" });
    } catch {
      // No prlimit on this machine: the soft limit stays, and the caller says so.
    }
  }
  return openFileLimit(pid);
}
