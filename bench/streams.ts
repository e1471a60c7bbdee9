// Row (s): how many open MCP event streams one broker holds. Every connected 2025-era client keeps
// a standalone GET stream (POST initialize → Mcp-Session-Id, then GET with Accept:
// text/event-stream) open for the server's messages; this row opens BENCH_STREAMS of them (default
// 5,000) from a process of their own (bench/stream-holder.ts) through the broker, in its own
// process, to an MCP server in its own process, and measures what they cost each side: resident memory per stream (each process's, read after a full GC by
// bench/broker-probe.ts inside it), the broker's event-loop lag while they are open
// (monitorEventLoopDelay, read from the broker's /metrics), and the latency of another client's
// cached tools/call next to them against the same with no stream open (each after the same
// warm-up, with the broker's collections over them), with the same calls direct to the MCP server
// as the control. For comparison, the same streams through the bare proxies of
// the cached rows (bench/bare-proxy.ts), each in a process of its own.
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import type { LoadResult } from "./load.ts";
import { mcpSession, toolCalls, warmOneClient } from "./mcp-calls.ts";
import { cpuMs, machineCpuMs, mainThreadSchedule, metricsText, raiseOpenFileLimit, startBareProxy, startProcess, stop } from "./processes.ts";
import { controlCall, probe, type Probe } from "./probe-control.ts";
import { type AllocationWindow, bytesByFunction, collectionsPer1000, originShares, topRows } from "./heap-profile.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";

export type StartBroker = (db: string, extra: Record<string, string>) => Promise<{ child: ChildProcess; url: string }>;

const STREAMS = Number(process.env.BENCH_STREAMS ?? 5000);
/** Descriptors the broker may keep open above its idle count once the streams have closed (its pool's spares). */
const SETTLED_FDS = 32;
/** Descriptors a process keeps for itself beyond the streams (listeners, database, pools, stdio). */
const FD_MARGIN = 256;

/** Functions listed among those that allocated what an open stream keeps in the broker. */
const RETAINED_TOP = Number(process.env.BENCH_RETAINED_TOP ?? 6);
/** Runs of the other client's 1,000 sequential calls while the streams are open. */
const RUNS = 3;
/**
 * The broker's event-loop monitor (prom-client's monitorEventLoopDelay) ticks every 10 ms and
 * records the whole interval between ticks: an idle loop reads 10 ms. The lag is what is above it.
 */
const MONITOR_TICK_MS = 10;

const TARGET_RSS_PER_STREAM = 20 * 1024;
const TARGET_LAG_P99_MS = 20;
const TARGET_P50_RATIO = 1.1;

/**
 * BENCH_PROFILE_DIR: the broker's CPU profiles of the other client's calls, idle and with the
 * streams open; and its heap snapshots before the sessions and with the streams open
 * (streams-before/open.heapsnapshot): what an open stream keeps, object by object.
 */
const PROFILE_DIR = process.env.BENCH_PROFILE_DIR;

/** The broker's heap snapshot into PROFILE_DIR/streams-`name`.heapsnapshot when that is set. */
async function heapSnapshot(broker: Probe, name: string): Promise<void> {
  if (PROFILE_DIR) await broker.call(`heap/snapshot?file=${encodeURIComponent(path.resolve(PROFILE_DIR, `streams-${name}.heapsnapshot`))}`);
}

/** `run`, profiled in the broker into PROFILE_DIR/streams-`name`.cpuprofile when that is set. */
async function profiled<T>(broker: Probe, name: string, run: () => Promise<T>): Promise<T> {
  if (!PROFILE_DIR) return run();
  await broker.call("cpu/start");
  const result = await run();
  writeFileSync(path.join(PROFILE_DIR, `streams-${name}.cpuprofile`), JSON.stringify(await broker.call("cpu/stop")));
  return result;
}

/** The run with the median p50 of RUNS: a burst of other work on the shared cores is an outlier, not the figure. */
async function medianRun(run: () => Promise<LoadResult>): Promise<LoadResult> {
  const runs: LoadResult[] = [];
  for (let i = 0; i < RUNS; i++) runs.push(await run());
  return runs.sort((a, b) => a.p50Ms - b.p50Ms)[Math.floor(RUNS / 2)]!;
}

/** Where the time of a run of sequential calls went, per call, in µs. */
interface CallTime {
  /** The broker's event loop on a core, and ready to run but waiting for one. */
  readonly brokerRun: number;
  readonly brokerWait: number;
  /** Every thread of the MCP server and of this process (the load generator). */
  readonly mcpCpu: number;
  readonly clientCpu: number;
  /** The machine's cores idle, over all cores. */
  readonly machineIdle: number;
  /**
   * The cores' busy time less the three processes' (the broker's every thread): the kernel's
   * interrupt work (the loopback traffic's included) and workers, time the host took (steal), and
   * any other process. Where a phase reads slow for everyone, this says whether something else ran
   * in it: the kernel writing back the databases' pages took 0.7 s of a 3 s phase in one run.
   */
  readonly othersCpu: number;
}

/**
 * medianRun, with the broker's collections over all RUNS (per 1,000 calls): what a larger heap
 * costs the calls; and where the calls' time went (CallTime): whether a slower call is the
 * broker's own work, or its wait for a core that the other processes hold.
 */
async function medianRunWithCollections(
  broker: Probe,
  pids: { broker: number | undefined; mcp: number | undefined },
  run: () => Promise<LoadResult>,
): Promise<LoadResult & { collections: string; time: CallTime }> {
  await broker.call("alloc/start");
  let calls = 0;
  const before = {
    broker: mainThreadSchedule(pids.broker),
    brokerAll: cpuMs(pids.broker),
    mcp: cpuMs(pids.mcp),
    client: process.cpuUsage(),
    machine: machineCpuMs(),
  };
  const median = await medianRun(async () => {
    const result = await run();
    calls += result.requests;
    return result;
  });
  const after = {
    broker: mainThreadSchedule(pids.broker),
    brokerAll: cpuMs(pids.broker),
    mcp: cpuMs(pids.mcp),
    client: process.cpuUsage(before.client),
    machine: machineCpuMs(),
  };
  const window = await broker.call<AllocationWindow>("alloc/stop");
  const time: CallTime = {
    brokerRun: (after.broker.runUs - before.broker.runUs) / calls,
    brokerWait: (after.broker.waitUs - before.broker.waitUs) / calls,
    mcpCpu: ((after.mcp - before.mcp) * 1000) / calls,
    clientCpu: (after.client.user + after.client.system) / calls,
    machineIdle: ((after.machine.idle - before.machine.idle) * 1000) / calls,
    othersCpu:
      ((after.machine.busy - before.machine.busy - (after.brokerAll - before.brokerAll) - (after.mcp - before.mcp)) * 1000 -
        (after.client.user + after.client.system)) /
      calls,
  };
  return { ...median, collections: collectionsPer1000([window], calls), time };
}

const callTime = (t: CallTime) =>
  `broker event loop ${t.brokerRun.toFixed(0)} µs on a core, ${t.brokerWait.toFixed(0)} µs waiting for one; MCP server ${t.mcpCpu.toFixed(0)} µs, load generator ${t.clientCpu.toFixed(0)} µs of CPU; everything else ${t.othersCpu.toFixed(0)} µs; cores idle ${t.machineIdle.toFixed(0)} µs`;

/** The client ends of the streams, in a process of their own (bench/stream-holder.ts says why). */
interface StreamHolder {
  readonly child: ChildProcess;
  call<T>(step: string): Promise<T>;
}

async function startHolder(endpoint: string, token?: string): Promise<StreamHolder> {
  const { child, match } = await startProcess(["bench/stream-holder.ts", endpoint], token ? { BENCH_STREAM_TOKEN: token } : {}, /STREAM_HOLDER (\d+)/);
  return { child, call: <T>(step: string) => controlCall<T>("stream holder", match[1]!, step) };
}

function openFds(pid: number | undefined): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/**
 * How many streams the machine lets the three processes hold: every stream takes a descriptor in
 * the stream holder (the client's socket), two in the broker (the client's, the MCP server's) and
 * one in the MCP server; and an ephemeral port for each of the two connections. Soft limits are
 * raised to the hard ones first.
 */
function streamsAllowed(
  holderPid: number | undefined,
  brokerPid: number | undefined,
  mcpPid: number | undefined,
): { n: number; limitedBy: string | undefined; fds: string } {
  const limits = { holder: raiseOpenFileLimit(holderPid), broker: raiseOpenFileLimit(brokerPid), mcp: raiseOpenFileLimit(mcpPid) };
  const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/).map(Number) as [number, number];
  const caps: Array<[string, number]> = [
    [`the stream holder's open-file limit (${limits.holder.soft})`, limits.holder.soft - openFds(holderPid) - FD_MARGIN],
    [`the broker's open-file limit (${limits.broker.soft}, two per stream)`, Math.floor((limits.broker.soft - openFds(brokerPid) - FD_MARGIN) / 2)],
    [`the MCP server's open-file limit (${limits.mcp.soft})`, limits.mcp.soft - openFds(mcpPid) - FD_MARGIN],
    [`the ephemeral port range (${low}–${high}, two connections per stream)`, Math.floor((high - low + 1 - 2 * FD_MARGIN) / 2)],
  ];
  const [why, cap] = caps.reduce((a, b) => (b[1] < a[1] ? b : a));
  const fds = `ulimit -n ${limits.broker.soft} (hard ${limits.broker.hard === Infinity ? "unlimited" : limits.broker.hard})`;
  return STREAMS <= cap ? { n: STREAMS, limitedBy: undefined, fds } : { n: Math.max(0, cap), limitedBy: why, fds };
}

function lagSeconds(metrics: string, stat: "p50" | "p99" | "max"): number {
  return Number(new RegExp(`^mab_nodejs_eventloop_lag_${stat}_seconds ([0-9.e+-]+)`, "m").exec(metrics)?.[1] ?? NaN);
}

interface Memory {
  readonly rssBytes: number;
  readonly heapUsedBytes: number;
}

/**
 * For comparison: the same streams through a bare proxy of the cached rows (bench/bare-proxy.ts,
 * Koa and undici, or node:http and undici alone), in a process of its own, to the same MCP
 * server. Written the plain way, it is not a lower bound: each keeps per stream what the broker's
 * relay (gateway/pump.ts) does not, Readable.pipe's bookkeeping under Koa's stream body, and
 * stream.pipeline's AbortController and end-of-stream listeners under node:http.
 */
async function floorPerStream(kind: "koa" | "plain", mcpUrl: string, n: number): Promise<{ rss: number; heap: number }> {
  const control = await probe();
  const { child, url: proxyUrl } = await startBareProxy(mcpUrl, kind, control.env);
  let holder: StreamHolder | undefined;
  try {
    raiseOpenFileLimit(child.pid);
    holder = await startHolder(proxyUrl);
    raiseOpenFileLimit(holder.child.pid);
    await holder.call(`sessions?n=${n}`);
    const before = await control.call<Memory>("gc");
    await holder.call("streams");
    const open = await control.call<Memory>("gc");
    return { rss: (open.rssBytes - before.rssBytes) / n, heap: (open.heapUsedBytes - before.heapUsedBytes) / n };
  } finally {
    if (holder) await stop(holder.child);
    await stop(child);
  }
}

/** What idleAgain needs of the row's setup. */
interface IdleAgainSetup {
  readonly url: string;
  readonly otherAuth: Record<string, string>;
  readonly otherSession: string;
  readonly directUrl: string;
  readonly directSession: string;
  readonly holder: StreamHolder;
  readonly brokerPid: number | undefined;
  /** The broker's open descriptors during the idle calls before the streams. */
  readonly idleFds: number;
}

/**
 * The other client's calls idle again, once the streams are closed: the holder ends their
 * sessions (DELETE through the broker) and closes them, the broker's descriptors back to about what they were before the streams
 * (at most 30 s), and the same warm-up as before the other runs. The broker and direct.
 */
async function idleAgain(s: IdleAgainSetup): Promise<{ idle: LoadResult; idleDirect: LoadResult }> {
  await s.holder.call("close");
  const deadline = performance.now() + 30_000;
  while (openFds(s.brokerPid) > s.idleFds + SETTLED_FDS && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  await toolCalls(s.url, s.otherAuth, s.otherSession);
  const idle = await medianRun(() => toolCalls(s.url, s.otherAuth, s.otherSession, 1));
  const idleDirect = await medianRun(() => toolCalls(s.directUrl, {}, s.directSession, 1));
  return { idle, idleDirect };
}

const kb = (bytes: number) => `${(bytes / 1024).toFixed(1)} KB`;
const verdict = (met: boolean) => (met ? "met" : "not met");

export async function streamRows(start: StartBroker): Promise<Array<[string, string]>> {
  const probes = { broker: await probe(), mcp: await probe() };
  // An MCP server of its own: its memory before the streams is not that of other rows' sessions.
  const { child: mcp, match } = await startProcess(["bench/serve-mcp.ts"], probes.mcp.env, /MCP_URL (\S+)/);
  let broker: { child: ChildProcess; url: string } | undefined;
  let holder: StreamHolder | undefined;
  try {
    broker = await start("streams.db", { MCP_SERVER_URL: match[1]!, ...probes.broker.env });
    const url = `${broker.url}/mcp`;
    // One access token for every stream's session: the broker limits neither sessions nor streams
    // per grant, and N sign-ins would dominate the setup. The other client has its own token.
    const { tokens } = await obtainTokens(broker.url, { user: "bench" });
    // Started before the idle runs, so that they run beside the same processes (it holds nothing yet).
    holder = await startHolder(url, tokens.access_token);
    const allowed = streamsAllowed(holder.child.pid, broker.child.pid, mcp.pid);
    const n = allowed.n;
    const other = await obtainTokens(broker.url, { user: "bench" });
    const otherAuth = { authorization: `Bearer ${other.tokens.access_token}` };
    const otherSession = await mcpSession(url, otherAuth);
    // Warmed as rows (a) and (a') warm theirs. After a single run at 50 clients, the first idle runs
    // cost every process more per call than the runs with the streams open did, minutes later (the
    // broker's event loop 475–529 against 392–428 µs, the load generator 273–301 against 173–184
    // µs), and read 1.04–1.16 ms against 0.75–0.86 ms for the same calls after the streams.
    await warmOneClient(url, otherAuth, otherSession);
    const pids = { broker: broker.child.pid, mcp: mcp.pid };
    const idle = await profiled(probes.broker, "idle", () => medianRunWithCollections(probes.broker, pids, () => toolCalls(url, otherAuth, otherSession, 1)));
    // The control: the same client's calls straight to the MCP server, which holds every stream's
    // session too. What the streams cost it shows here as well; what the broker adds is the difference.
    const directUrl = match[1]!;
    const directSession = await mcpSession(directUrl, {});
    await warmOneClient(directUrl, {}, directSession);
    const idleDirect = await medianRun(() => toolCalls(directUrl, {}, directSession, 1));
    const idleFds = openFds(broker.child.pid);

    const memory = async () => {
      const [b, m] = await Promise.all([probes.broker.call<Memory>("gc"), probes.mcp.call<Memory>("gc")]);
      return { broker: b, mcp: m };
    };
    await heapSnapshot(probes.broker, "before");
    const before = await memory();
    const setupStarted = performance.now();
    await holder.call(`sessions?n=${n}`);
    const withSessions = await memory();
    // What the streams keep alive in the broker, and which functions allocated it.
    await probes.broker.call("alloc/start?sample=live");
    await holder.call("streams");
    const setupSeconds = (performance.now() - setupStarted) / 1000;
    await probes.broker.call("gc");
    const retained = await probes.broker.call<AllocationWindow>("alloc/stop");
    const kept = { byFunction: retained.profile ? bytesByFunction(retained.profile.head) : [], total: retained.sampledBytes ?? 0 };
    const open = await memory();
    await heapSnapshot(probes.broker, "open");
    // The same warm-up as before the idle calls: the full collections of the memory readings
    // shrink V8's young generation, and the calls after them would otherwise run with a smaller
    // one than the idle calls did (3.3 against 10.3 scavenges per 1,000 calls).
    await toolCalls(url, otherAuth, otherSession);
    // The event loop's lag while the streams are open and another client calls a tool: /metrics
    // reads and resets the broker's histogram, so the second read covers the other client's calls alone.
    await metricsText(broker.url);
    const busy = await profiled(probes.broker, "open", () => medianRunWithCollections(probes.broker, pids, () => toolCalls(url, otherAuth, otherSession, 1)));
    const metrics = await metricsText(broker.url);
    const busyDirect = await medianRun(() => toolCalls(directUrl, {}, directSession, 1));
    const tally = await holder.call<{ ended: number; received: number }>("tally");
    const stillOpen = n - tally.ended;
    const { received } = tally;
    const after = await idleAgain({ url, otherAuth, otherSession, directUrl, directSession, holder, brokerPid: broker.child.pid, idleFds });
    // The broker's streams are closed first: the floors' take the same descriptors and ports.
    const floors = { koa: await floorPerStream("koa", directUrl, n), plain: await floorPerStream("plain", directUrl, n) };

    const per = (from: typeof before, to: typeof before, key: keyof Memory) => ({
      broker: (to.broker[key] - from.broker[key]) / n,
      mcp: (to.mcp[key] - from.mcp[key]) / n,
    });
    const perStream = per(withSessions, open, "rssBytes");
    const heapPerStream = per(withSessions, open, "heapUsedBytes");
    const perSession = per(before, withSessions, "rssBytes");
    const heapPerSession = per(before, withSessions, "heapUsedBytes");
    const lagP99Ms = lagSeconds(metrics, "p99") * 1000 - MONITOR_TICK_MS;
    const lagMaxMs = lagSeconds(metrics, "max") * 1000 - MONITOR_TICK_MS;
    // Idle is the mean of the runs before the streams and after them: the machine drifts over
    // the minutes between, and the streams' calls come in the middle.
    const idleP50 = (idle.p50Ms + after.idle.p50Ms) / 2;
    const idleDirectP50 = (idleDirect.p50Ms + after.idleDirect.p50Ms) / 2;
    const ratio = busy.p50Ms / idleP50;
    const rssMet = perStream.broker <= TARGET_RSS_PER_STREAM && perStream.mcp <= TARGET_RSS_PER_STREAM;
    return [
      [
        `(s) ${n} standalone GET streams open through the broker`,
        `${allowed.limitedBy ? `limited from ${STREAMS} by ${allowed.limitedBy}` : `${allowed.fds}, enough`}; one access token for all sessions; sessions and streams opened in ${setupSeconds.toFixed(1)} s; ${stillOpen} still open after the other client's calls${received ? `, ${received} bytes received on them` : ""}`,
      ],
      [
        "    RSS per GET stream: broker / MCP server",
        `${kb(perStream.broker)} / ${kb(perStream.mcp)} (of it V8 heap ${kb(heapPerStream.broker)} / ${kb(heapPerStream.mcp)}; broker ${(open.broker.rssBytes / 2 ** 20).toFixed(0)} MB with them open); target ≤ 20 KB each: ${verdict(rssMet)}`,
      ],
      [
        "    the same streams through a bare proxy, per stream",
        `Koa + undici ${kb(floors.koa.rss)} (V8 heap ${kb(floors.koa.heap)}), node:http + undici ${kb(floors.plain.rss)} (V8 heap ${kb(floors.plain.heap)}); the broker against Koa + undici: ${kb(perStream.broker - floors.koa.rss)} (V8 heap ${kb(heapPerStream.broker - floors.koa.heap)})`,
      ],
      [
        "    RSS per MCP session before its stream: broker / MCP server",
        `${kb(perSession.broker)} / ${kb(perSession.mcp)} (V8 heap ${kb(heapPerSession.broker)} / ${kb(heapPerSession.mcp)}; not in the target: the session, not the stream)`,
      ],
      ["    broker heap kept per stream (sampled), by origin", `${kb(kept.total / n)}: ${originShares(kept.byFunction, kept.total)}`],
      ...topRows("    top functions (what allocated it)", kept.byFunction, RETAINED_TOP, n, kept.total),
      [
        "    broker event-loop lag while another client calls",
        `p99 ${lagP99Ms.toFixed(1)} ms, max ${lagMaxMs.toFixed(1)} ms (above the monitor's ${MONITOR_TICK_MS} ms tick; p50 ${(lagSeconds(metrics, "p50") * 1000 - MONITOR_TICK_MS).toFixed(2)} ms); target p99 < ${TARGET_LAG_P99_MS} ms: ${verdict(lagP99Ms < TARGET_LAG_P99_MS)}`,
      ],
      [
        "    that client's p50, streams open vs idle",
        `${busy.p50Ms.toFixed(2)} ms vs ${idleP50.toFixed(2)} ms (idle before the streams ${idle.p50Ms.toFixed(2)} ms, after ${after.idle.p50Ms.toFixed(2)} ms; p99 ${busy.p99Ms.toFixed(2)} vs ${idle.p99Ms.toFixed(2)} and ${after.idle.p99Ms.toFixed(2)} ms; each the median of ${RUNS} runs of ${busy.requests} sequential calls): ${ratio.toFixed(2)}×; target ≤ ${TARGET_P50_RATIO}×: ${verdict(ratio <= TARGET_P50_RATIO)}`,
      ],
      ["    the broker's collections per 1,000 of those calls", `idle: ${idle.collections}; streams open: ${busy.collections}`],
      ["    per call, idle (before the streams)", callTime(idle.time)],
      ["    per call, streams open", callTime(busy.time)],
      [
        "    the control: the same calls direct to the MCP server",
        `${busyDirect.p50Ms.toFixed(2)} ms vs ${idleDirectP50.toFixed(2)} ms (before ${idleDirect.p50Ms.toFixed(2)}, after ${after.idleDirect.p50Ms.toFixed(2)} ms; ${(busyDirect.p50Ms / idleDirectP50).toFixed(2)}×); the broker's added p50 ${(busy.p50Ms - busyDirect.p50Ms).toFixed(2)} ms with the streams open vs ${(idleP50 - idleDirectP50).toFixed(2)} ms idle`,
      ],
    ];
  } finally {
    if (holder) await stop(holder.child);
    if (broker) await stop(broker.child);
    await stop(mcp);
  }
}
