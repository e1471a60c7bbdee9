// A small closed-loop load generator: `concurrency` workers each send requests back to back over a
// keep-alive pool until `requests` have completed; latencies are measured per request.
import { Pool } from "undici";

export interface LoadResult {
  readonly requests: number;
  readonly errors: number;
  readonly seconds: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

export interface LoadOptions {
  readonly url: string;
  readonly method?: "POST" | "GET";
  readonly headers: (worker: number) => Record<string, string>;
  readonly body?: (worker: number, i: number) => string;
  readonly concurrency: number;
  readonly requests: number;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const url = new URL(options.url);
  const pool = new Pool(url.origin, { connections: options.concurrency, pipelining: 1 });
  const latencies: number[] = [];
  let errors = 0;
  let issued = 0;
  const started = performance.now();
  const worker = async (w: number) => {
    while (issued < options.requests) {
      const i = issued++;
      const t0 = performance.now();
      try {
        const res = await pool.request({
          path: url.pathname + url.search,
          method: options.method ?? "POST",
          headers: options.headers(w),
          ...(options.body ? { body: options.body(w, i) } : {}),
        });
        await res.body.text();
        if (res.statusCode >= 400) errors++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: options.concurrency }, (_, w) => worker(w)));
  const seconds = (performance.now() - started) / 1000;
  await pool.close();
  latencies.sort((a, b) => a - b);
  return {
    requests: latencies.length,
    errors,
    seconds,
    rps: latencies.length / seconds,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
  };
}
