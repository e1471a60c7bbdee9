// Loaded into a bench process (the broker, the MCP server; by bench/probe-control.ts's
// NODE_OPTIONS) to measure from inside what no outside view shows. A control listener on
// 127.0.0.1:BENCH_PROBE_PORT, apart from the process's own:
//   POST /alloc/start           starts counting the bytes the V8 heap allocates (v8.GCProfiler);
//   POST /alloc/start?sample=1  the same, and starts the sampling heap profiler (every allocation);
//   POST /alloc/start?sample=live  the same, the profile keeping only what is still alive at the end;
//   POST /alloc/stop            stops them and answers { allocatedBytes, gcs, sampledBytes?, profile? };
//   POST /cpu/start, /cpu/stop  a V8 CPU profile of this thread over a window (the profile's JSON);
//   POST /gc                    a full garbage collection, then { rssBytes, heapUsedBytes }: memory
//                               read without the garbage a moment's work happens to leave.
//   POST /heap/snapshot?file=F  a full garbage collection, then a V8 heap snapshot written to F
//                               (open it in Chrome DevTools' Memory tab; compare two to see what grew).
// Bytes allocated = the heap's growth over the window + what every GC in it freed: exact for the
// V8 heap, unlike the sampled profile, which says where the bytes came from.
import http from "node:http";
import { Session } from "node:inspector/promises";
import v8 from "node:v8";
import { isMainThread } from "node:worker_threads";

type ProfileNode = { readonly selfSize: number; readonly children: readonly ProfileNode[] };

/**
 * Every allocation may be sampled, the young garbage a request leaves included (the point): without
 * the two flags (V8's, newer than Node's type declarations) the profile shows only what is still
 * alive at the end. 32 KiB: V8's default interval.
 */
const SAMPLING = { samplingInterval: 32 * 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };

// For this process's main thread only: the broker's worker threads (the database writer) load
// it too, and the processes it starts (its migration run, stdio servers) get the environment
// they would have had without the probe.
const port = Number(process.env.BENCH_PROBE_PORT);
const inherited = process.env.BENCH_PROBE_INHERITED_NODE_OPTIONS;
if (inherited) process.env.NODE_OPTIONS = inherited;
else delete process.env.NODE_OPTIONS;
delete process.env.BENCH_PROBE_INHERITED_NODE_OPTIONS;
delete process.env.BENCH_PROBE_PORT;

/** Connected to this thread's inspector on first use. */
let session: Session | undefined;
type Sampling = "none" | "all" | "live";
let window: { gc: v8.GCProfiler; usedAtStart: number; sampling: Sampling } | undefined;

function inspector(): Session {
  if (!session) {
    session = new Session();
    session.connect();
  }
  return session;
}

function sampledBytes(node: ProfileNode): number {
  return node.children.reduce((sum, child) => sum + sampledBytes(child), node.selfSize);
}

/**
 * With `sampling`, the profiler too: it slows allocation, and so every GC's pause, but not what is
 * allocated. "live": what a window leaves allocated (the memory of open streams), not its garbage.
 */
async function startWindow(sampling: Sampling): Promise<void> {
  if (sampling !== "none") {
    await inspector().post("HeapProfiler.enable");
    await inspector().post("HeapProfiler.startSampling", sampling === "all" ? SAMPLING : { samplingInterval: SAMPLING.samplingInterval });
  }
  const gc = new v8.GCProfiler();
  gc.start();
  window = { gc, usedAtStart: v8.getHeapStatistics().used_heap_size, sampling };
}

async function stopWindow(): Promise<unknown> {
  if (!window) throw new Error("no window started");
  const usedAtEnd = v8.getHeapStatistics().used_heap_size;
  const { statistics } = window.gc.stop();
  const profile = window.sampling !== "none" ? (await inspector().post("HeapProfiler.stopSampling")).profile : undefined;
  const freed = statistics.reduce((sum, s) => sum + s.beforeGC.heapStatistics.usedHeapSize - s.afterGC.heapStatistics.usedHeapSize, 0);
  const gcs: Record<string, { count: number; us: number }> = {};
  for (const s of statistics) {
    const entry = gcs[s.gcType] ?? { count: 0, us: 0 };
    gcs[s.gcType] = { count: entry.count + 1, us: entry.us + s.cost };
  }
  const allocatedBytes = usedAtEnd - window.usedAtStart + freed;
  window = undefined;
  return { allocatedBytes, gcs, ...(profile && { sampledBytes: sampledBytes(profile.head), profile }) };
}

async function collected(): Promise<unknown> {
  await inspector().post("HeapProfiler.collectGarbage");
  const { rss, heapUsed } = process.memoryUsage();
  return { rssBytes: rss, heapUsedBytes: heapUsed };
}

/** Starts V8's CPU profiler on this thread (a window of one row's requests, not the whole run). */
async function startCpuProfile(): Promise<unknown> {
  await inspector().post("Profiler.enable");
  await inspector().post("Profiler.start");
  return {};
}

/** Stops it and answers the profile (.cpuprofile JSON, for Chrome DevTools). */
async function stopCpuProfile(): Promise<unknown> {
  return (await inspector().post("Profiler.stop")).profile;
}

async function heapSnapshot(file: string): Promise<unknown> {
  await inspector().post("HeapProfiler.collectGarbage");
  return { file: v8.writeHeapSnapshot(file) };
}

const ACTIONS: Record<string, () => Promise<unknown>> = {
  "/cpu/start": startCpuProfile,
  "/cpu/stop": stopCpuProfile,
  "/alloc/start": () => startWindow("none"),
  "/alloc/start?sample=1": () => startWindow("all"),
  "/alloc/start?sample=live": () => startWindow("live"),
  "/alloc/stop": stopWindow,
  "/gc": collected,
};

function serve(): void {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://probe");
    const file = url.pathname === "/heap/snapshot" ? url.searchParams.get("file") : null;
    const action = req.method !== "POST" ? undefined : file ? () => heapSnapshot(file) : ACTIONS[req.url ?? ""];
    if (!action) {
      res.writeHead(404).end();
      return;
    }
    action().then(
      (body) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body ?? {})),
      (err: unknown) => res.writeHead(409, { "content-type": "text/plain" }).end(String(err)),
    );
  });
  server.listen(port, "127.0.0.1");
  // Never what keeps the process alive: it ends as it would without the probe.
  server.unref();
}

if (isMainThread) serve();
