// The MCP traffic every /mcp row of the bench sends: a session opened as a client opens one, then
// tools/call requests within it from any number of concurrent clients; or MCP 2026-07-28 tools/call
// requests, each on its own (no session), as the SDK v2 client sends them.
import { Pool } from "undici";
import { median, runLoad } from "./load.ts";
import { metricsText } from "./processes.ts";
import { INITIALIZE_MESSAGE } from "../test/support/mcp-probe.ts";

export const CONCURRENCY = 50;
export const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5000);
/** One client sending back to back: latency without queueing behind other clients on busy cores. */
export const SEQUENTIAL_REQUESTS = 1000;

/** Opens an MCP session (initialize + initialized) and returns its id. */
export async function mcpSession(url: string, headers: Record<string, string>): Promise<string> {
  const base = { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers };
  const res = await fetch(url, {
    method: "POST",
    headers: base,
    body: JSON.stringify(INITIALIZE_MESSAGE),
  });
  const id = res.headers.get("mcp-session-id");
  await res.text();
  if (!id) throw new Error(`no MCP session from ${url}: ${res.status}`);
  const note = await fetch(url, {
    method: "POST",
    headers: { ...base, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await note.text();
  return id;
}

/** tools/call echo requests: REQUESTS of them at `concurrency` clients, or `requests` when given; `rate` paces them (per second). */
export function toolCalls(url: string, headers: Record<string, string>, session: string, concurrency = CONCURRENCY, requests?: number, rate?: number) {
  return runLoad({
    url,
    concurrency,
    ...(rate !== undefined ? { rate } : {}),
    requests: requests ?? (concurrency === 1 ? SEQUENTIAL_REQUESTS : REQUESTS),
    headers: () => ({
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": session,
      "mcp-protocol-version": "2025-06-18",
      ...headers,
    }),
    body: (w, i) => JSON.stringify({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name: "echo", arguments: { message: `w${w}` } } }),
  });
}

/** The per-request envelope of MCP 2026-07-28, as the SDK v2 client attaches it. */
const MODERN_META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1" },
  "io.modelcontextprotocol/clientCapabilities": {},
};

/** 2026-07-28 stateless tools/call echo requests, with the request metadata headers. */
export function statelessToolCalls(url: string, headers: Record<string, string>, concurrency = CONCURRENCY, requests?: number, rate?: number) {
  return runLoad({
    url,
    concurrency,
    ...(rate !== undefined ? { rate } : {}),
    requests: requests ?? (concurrency === 1 ? SEQUENTIAL_REQUESTS : REQUESTS),
    headers: () => ({
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
      "mcp-name": "echo",
      ...headers,
    }),
    body: (w, i) =>
      JSON.stringify({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name: "echo", arguments: { message: `w${w}` }, _meta: MODERN_META } }),
  });
}

/** Blocks of SEQUENTIAL_REQUESTS calls by one client through the broker, interleaved with as many direct. */
export const ONE_CLIENT_BLOCKS = 5;

export interface OneClientBlock {
  readonly addedP50Ms: number;
  readonly addedP99Ms: number;
  readonly directP50Ms: number;
  /** The direct calls' own p99: the tail of the machine and the MCP server, which both sides share. */
  readonly directP99Ms: number;
}

interface Target {
  readonly url: string;
  readonly session: string;
  readonly headers?: Record<string, string>;
}

/** One tools/call to `target` on its own keep-alive connection; its latency in ms. */
async function timedCall(pool: Pool, target: Target, i: number): Promise<number> {
  const t0 = performance.now();
  const res = await pool.request({
    path: new URL(target.url).pathname,
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": target.session,
      "mcp-protocol-version": "2025-06-18",
      ...target.headers,
    },
    body: JSON.stringify({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name: "echo", arguments: { message: "w0" } } }),
  });
  await res.body.text();
  if (res.statusCode >= 400) throw new Error(`one-client call answered ${res.statusCode}`);
  return performance.now() - t0;
}

const percentileOf = (sorted: readonly number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** Read before the first counted block and after the last. */
export interface CountedBlocksProbe {
  readonly before: () => Promise<void>;
  readonly after: () => Promise<void>;
}

/** The broker's collections so far, from its /metrics: scavenges (V8's minor GC) and their pauses. */
async function scavengesSoFar(brokerUrl: string): Promise<{ count: number; seconds: number }> {
  const text = await metricsText(brokerUrl);
  const value = (suffix: string) => Number(new RegExp(`^mab_nodejs_gc_duration_seconds_${suffix}\\{kind="minor"\\} ([0-9.e+-]+)`, "m").exec(text)?.[1] ?? NaN);
  return { count: value("count"), seconds: value("sum") };
}

/**
 * The broker's scavenges during the counted blocks, and what they paused it for. Each pauses the
 * event loop for the call it lands on; the blocks' p99 is their tenth slowest call in a thousand.
 */
export function brokerScavenges(brokerUrl: string): CountedBlocksProbe & { readonly line: () => string } {
  let start = { count: NaN, seconds: NaN };
  let end = start;
  return {
    before: async () => {
      start = await scavengesSoFar(brokerUrl);
    },
    after: async () => {
      end = await scavengesSoFar(brokerUrl);
    },
    line: () => {
      const count = end.count - start.count;
      const calls = ONE_CLIENT_BLOCKS * SEQUENTIAL_REQUESTS;
      return `${count} in ${calls} calls (${((count * 1000) / calls).toFixed(1)} per 1,000), ${count > 0 ? (((end.seconds - start.seconds) * 1000) / count).toFixed(2) : "—"} ms each on average`;
    },
  };
}

/**
 * Warm one client's path as row (a)'s proxies are when their blocks run: the validation cache and
 * the optimizing compiler at 50 clients, then 2,000 calls by one client alone, so that the heap the
 * concurrent runs left is collected and the one-client path is compiled before anything is counted.
 */
export async function warmOneClient(url: string, headers: Record<string, string>, session: string): Promise<void> {
  for (let i = 0; i < 2; i++) await toolCalls(url, headers, session);
  await toolCalls(url, headers, session, 1, 2 * SEQUENTIAL_REQUESTS);
}

/** Blocks run before the counted ones (why: oneClientBlocks). */
const WARM_BLOCKS = 1;

/** One block: SEQUENTIAL_REQUESTS calls each way, alternating call by call (which goes first alternating too). */
async function interleavedBlock(pools: readonly [Pool, Pool], direct: Target, through: Target): Promise<{ direct: number[]; through: number[] }> {
  const d: number[] = [];
  const t: number[] = [];
  for (let i = 0; i < SEQUENTIAL_REQUESTS; i++) {
    if (i % 2 === 0) {
      d.push(await timedCall(pools[0], direct, i));
      t.push(await timedCall(pools[1], through, i));
    } else {
      t.push(await timedCall(pools[1], through, i));
      d.push(await timedCall(pools[0], direct, i));
    }
  }
  return { direct: d.sort((x, y) => x - y), through: t.sort((x, y) => x - y) };
}

/**
 * One client's latency through the broker against the same calls direct, in ONE_CLIENT_BLOCKS
 * blocks: each block's added p50 and p99. The direct and the broker's calls alternate call by call,
 * so a pause of the shared machine falls on both sides alike instead of on whichever block it
 * happened in; a block still shows its own figure.
 *
 * A block runs first and is not counted: the pools open new connections, and the first calls on
 * them take paths the warm-up at 50 clients did not (connection setup, code the optimizing compiler
 * has not seen this way yet, in each of the three processes). The counted blocks are the steady state.
 *
 * `probe` is read before the first counted block and after the last (brokerScavenges).
 */
export async function oneClientBlocks(direct: Target, through: Target, probe?: CountedBlocksProbe): Promise<OneClientBlock[]> {
  const pools = [direct, through].map((t) => new Pool(new URL(t.url).origin, { connections: 1, pipelining: 1 })) as [Pool, Pool];
  try {
    // Read once before the warm block too: the first read's own work (the metrics code compiled, a
    // database count) then lands in a block that is not counted.
    await probe?.before();
    for (let b = 0; b < WARM_BLOCKS; b++) await interleavedBlock(pools, direct, through);
    await probe?.before();
    const blocks: OneClientBlock[] = [];
    for (let b = 0; b < ONE_CLIENT_BLOCKS; b++) {
      const { direct: d, through: t } = await interleavedBlock(pools, direct, through);
      blocks.push({
        addedP50Ms: percentileOf(t, 50) - percentileOf(d, 50),
        addedP99Ms: percentileOf(t, 99) - percentileOf(d, 99),
        directP50Ms: percentileOf(d, 50),
        directP99Ms: percentileOf(d, 99),
      });
    }
    await probe?.after();
    return blocks;
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
}

/** "median p50 / p99 added; p99 per block" of one-client blocks, as rows (a) and (a') print them. */
export function blockFigures(blocks: readonly OneClientBlock[]): string {
  const p99s = blocks.map((b) => b.addedP99Ms);
  return `median ${median(blocks.map((b) => b.addedP50Ms)).toFixed(2)} ms / ${median(p99s).toFixed(2)} ms; p99 per block ${p99s.map((p) => p.toFixed(2)).join(", ")} ms`;
}
