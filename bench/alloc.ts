// Row (m): bytes the broker allocates per cached /mcp request: the tools/call of row (a) (50
// clients, warm validation cache), counted inside the broker process by bench/broker-probe.ts over
// windows of ALLOC_REQUESTS requests: the V8 heap's growth plus what every GC in the window freed.
// The sampling heap profiler, over one more window, says which functions allocated the bytes
// (self size, young garbage included): where to cut first. The same windows through the bare Koa +
// undici proxy (bench/bare-proxy.ts), and through node:http + undici alone, are the floor: what
// any streaming proxy of these libraries allocates, so that the broker's own share is printed too.
import type { ChildProcess } from "node:child_process";
import { CONCURRENCY, mcpSession, toolCalls } from "./mcp-calls.ts";
import { startBareProxy, stop } from "./processes.ts";
import { type AllocationWindow, bytesByFunction, collectionsPer1000, originShares, topRows } from "./heap-profile.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";
import { probe, type Probe } from "./probe-control.ts";

export type StartBroker = (db: string, extra: Record<string, string>) => Promise<{ child: ChildProcess; url: string }>;

const ALLOC_REQUESTS = Number(process.env.BENCH_ALLOC_REQUESTS ?? 10_000);
const WINDOWS = 3;
const TOP = Number(process.env.BENCH_ALLOC_TOP ?? 10);

/** One window of ALLOC_REQUESTS tools/call at CONCURRENCY clients, counted by the probe in the broker. */
async function measured(
  control: Probe,
  url: string,
  auth: Record<string, string>,
  session: string,
  sample: boolean,
): Promise<AllocationWindow & { requests: number }> {
  await control.call(sample ? "alloc/start?sample=1" : "alloc/start");
  const run = await toolCalls(url, auth, session, CONCURRENCY, ALLOC_REQUESTS);
  return { ...(await control.call<AllocationWindow>("alloc/stop")), requests: run.requests };
}

/** Bytes per request in each of WINDOWS windows through `url`, after two warm-up runs, smallest first. */
async function windowsThrough(control: Probe, url: string, auth: Record<string, string>): Promise<number[]> {
  const session = await mcpSession(url, auth);
  // Warm-up twice: the broker's validation cache, then the optimizing compiler (whose code allocates less).
  await toolCalls(url, auth, session);
  await toolCalls(url, auth, session);
  const perRequest: number[] = [];
  for (let w = 0; w < WINDOWS; w++) {
    const window = await measured(control, url, auth, session, false);
    perRequest.push(window.allocatedBytes / window.requests);
  }
  return perRequest.sort((a, b) => a - b);
}

const median = (sorted: readonly number[]) => sorted[Math.floor(sorted.length / 2)]!;

/** The floor's bytes per request: the bare proxy (`koa` or `plain` node:http) in front of `mcpUrl`, counted by the same probe. */
async function floorBytes(mcpUrl: string, kind: "koa" | "plain"): Promise<number> {
  const control = await probe();
  const { child, url } = await startBareProxy(mcpUrl, kind, control.env);
  try {
    return median(await windowsThrough(control, url, {}));
  } finally {
    await stop(child);
  }
}

export async function allocRows(start: StartBroker, mcpUrl: string): Promise<Array<[string, string]>> {
  const { figure, rows } = await brokerAllocRows(start);
  // BENCH_ALLOC_FLOORS=0: the broker's windows alone, while working on its own bytes (the floors stay put).
  if (process.env.BENCH_ALLOC_FLOORS === "0") return rows;
  const koa = await floorBytes(mcpUrl, "koa");
  const plain = await floorBytes(mcpUrl, "plain");
  rows.splice(1, 0, [
    "    the floor: bare Koa + undici proxy / node:http + undici",
    `${koa.toFixed(0)} B / ${plain.toFixed(0)} B (same windows); the broker's own share above the Koa floor ${(figure - koa).toFixed(0)} B`,
  ]);
  return rows;
}

/** The broker's figure (bytes per request, the median window) and its rows. */
async function brokerAllocRows(start: StartBroker): Promise<{ figure: number; rows: Array<[string, string]> }> {
  const control = await probe();
  const broker = await start("alloc.db", control.env);
  try {
    const url = `${broker.url}/mcp`;
    const { tokens } = await obtainTokens(broker.url, { user: "bench" });
    const auth = { authorization: `Bearer ${tokens.access_token}` };
    const session = await mcpSession(url, auth);
    // Warm-up twice: the validation cache, then the optimizing compiler (whose code allocates less).
    await toolCalls(url, auth, session);
    await toolCalls(url, auth, session);
    // The figure and the collections: windows without the profiler, which slows every allocation.
    const windows: Array<AllocationWindow & { requests: number }> = [];
    for (let w = 0; w < WINDOWS; w++) windows.push(await measured(control, url, auth, session, false));
    // Where the bytes come from: one more window, sampled.
    const sampledWindow = await measured(control, url, auth, session, true);
    const perRequest = windows.map((w) => w.allocatedBytes / w.requests).sort((a, b) => a - b);
    const figure = median(perRequest);
    const requests = windows.reduce((sum, w) => sum + w.requests, 0);
    const sampledTotal = sampledWindow.sampledBytes ?? 0;
    const sampledPerRequest = sampledTotal / sampledWindow.requests;
    const byFunction = sampledWindow.profile ? bytesByFunction(sampledWindow.profile.head) : [];
    const rows: Array<[string, string]> = [
      [
        `(m) bytes allocated per cached /mcp tools/call, ${CONCURRENCY} clients (V8 heap)`,
        `${figure.toFixed(0)} B, median of ${WINDOWS} windows of ${ALLOC_REQUESTS} requests (${perRequest.map((b) => b.toFixed(0)).join(", ")}: spread ${(((perRequest.at(-1)! - perRequest[0]!) / figure) * 100).toFixed(1)}%); target: printed, then halved`,
      ],
      ["    collections per 1,000 requests", collectionsPer1000(windows, requests)],
      ["    sampled (one more window): by origin", `${sampledPerRequest.toFixed(0)} B per request: ${originShares(byFunction, sampledTotal)}`],
      ...topRows(`    top ${TOP} functions by self size, per request`, byFunction, TOP, sampledWindow.requests, sampledTotal),
    ];
    return { figure, rows };
  } finally {
    await stop(broker.child);
  }
}
