// A small closed-loop load generator: `concurrency` workers each send requests back to back (over a
// keep-alive pool, or any async call) until `requests` have completed; latencies are measured per request.
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
  /** Requests per second: request i starts no sooner than i / rate seconds in (closed loop otherwise). */
  readonly rate?: number;
}

/** The middle value (the mean of the two middle ones for an even count): a burst on the shared cores moves it least. */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/**
 * Closed loop: `concurrency` workers each run `call` back to back until `requests` calls have
 * completed. `call` resolves true for a success, false (or throws) for an error. With `rate`, the
 * calls are paced: call i starts no sooner than i / rate seconds after the first, so that two
 * kinds of request can be compared at the same throughput.
 */
export async function runClosedLoop(
  concurrency: number,
  requests: number,
  call: (worker: number, i: number) => Promise<boolean>,
  rate?: number,
): Promise<LoadResult> {
  const latencies: number[] = [];
  let errors = 0;
  let issued = 0;
  const started = performance.now();
  const worker = async (w: number) => {
    while (issued < requests) {
      const i = issued++;
      if (rate !== undefined) {
        const wait = started + (i * 1000) / rate - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      }
      const t0 = performance.now();
      try {
        if (!(await call(w, i))) errors++;
      } catch {
        errors++;
      }
      latencies.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, w) => worker(w)));
  const seconds = (performance.now() - started) / 1000;
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

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const url = new URL(options.url);
  const pool = new Pool(url.origin, { connections: options.concurrency, pipelining: 1 });
  try {
    return await runClosedLoop(
      options.concurrency,
      options.requests,
      async (w, i) => {
        const res = await pool.request({
          path: url.pathname + url.search,
          method: options.method ?? "POST",
          headers: options.headers(w),
          ...(options.body ? { body: options.body(w, i) } : {}),
        });
        await res.body.text();
        return res.statusCode < 400;
      },
      options.rate,
    );
  } finally {
    await pool.close();
  }
}
