// Row (m): bytes the broker allocates per cached /mcp request: the tools/call of row (a) (50
// clients, warm validation cache), counted inside the broker process by bench/broker-probe.ts over
// windows of ALLOC_REQUESTS requests: the V8 heap's growth plus what every GC in the window freed.
// The sampling heap profiler, over one more window, says which functions allocated the bytes
// (self size, young garbage included): where to cut first.
import type { ChildProcess } from "node:child_process";
import { CONCURRENCY, mcpSession, toolCalls } from "./mcp-calls.ts";
import { stop } from "./processes.ts";
import { type AllocationWindow, bytesByFunction, originShares, topRows } from "./heap-profile.ts";
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

export async function allocRows(start: StartBroker): Promise<Array<[string, string]>> {
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
    const median = perRequest[Math.floor(perRequest.length / 2)]!;
    const requests = windows.reduce((sum, w) => sum + w.requests, 0);
    const gcs = new Map<string, { count: number; us: number }>();
    for (const w of windows) {
      for (const [type, g] of Object.entries(w.gcs)) {
        const sum = gcs.get(type) ?? { count: 0, us: 0 };
        gcs.set(type, { count: sum.count + g.count, us: sum.us + g.us });
      }
    }
    const collections = [...gcs]
      .filter(([type]) => type === "Scavenge" || type === "MinorMarkCompact" || type === "MarkSweepCompact")
      .map(([type, g]) => `${((g.count / requests) * 1000).toFixed(1)} ${type} (${(g.us / 1000 / g.count).toFixed(1)} ms each)`);
    const sampledTotal = sampledWindow.sampledBytes ?? 0;
    const sampledPerRequest = sampledTotal / sampledWindow.requests;
    const byFunction = sampledWindow.profile ? bytesByFunction(sampledWindow.profile.head) : [];
    return [
      [
        `(m) bytes allocated per cached /mcp tools/call, ${CONCURRENCY} clients (V8 heap)`,
        `${median.toFixed(0)} B, median of ${WINDOWS} windows of ${ALLOC_REQUESTS} requests (${perRequest.map((b) => b.toFixed(0)).join(", ")}: spread ${(((perRequest.at(-1)! - perRequest[0]!) / median) * 100).toFixed(1)}%); target: printed, then halved`,
      ],
      ["    collections per 1,000 requests", collections.join(", ") || "none"],
      ["    sampled (one more window): by origin", `${sampledPerRequest.toFixed(0)} B per request: ${originShares(byFunction, sampledTotal)}`],
      ...topRows(`    top ${TOP} functions by self size, per request`, byFunction, TOP, sampledWindow.requests, sampledTotal),
    ];
  } finally {
    await stop(broker.child);
  }
}
