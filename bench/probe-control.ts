// The bench's side of bench/broker-probe.ts: the environment that loads it into a child process,
// and its control calls.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { root } from "./processes.ts";
import { freePort } from "../test/support/start-broker.ts";

export interface Probe {
  /** What the child's environment needs (merged into the rest). */
  readonly env: Record<string, string>;
  /** POSTs one control action ("alloc/start", "alloc/stop", "gc"); resolves with its JSON answer. */
  call<T>(action: string): Promise<T>;
}

/**
 * What the child preloads: bench/broker-probe.ts, through tsx's loader for that import alone (the
 * broker itself is the compiled dist/, as in every row), and in the main thread only (the database
 * writer's worker thread preloads it too, without tsx's hooks). A data: URL, so that no
 * plain-JavaScript file sits among the type-checked bench sources.
 */
function loader(): string {
  const tsx = import.meta.resolve("tsx/esm/api");
  const probe = pathToFileURL(path.join(root, "bench/broker-probe.ts")).href;
  const code = `import{isMainThread}from'node:worker_threads';if(isMainThread){const{register}=await import('${tsx}');const unregister=register();await import('${probe}');await unregister()}`;
  return `data:text/javascript,${encodeURIComponent(code)}`;
}

/** POSTs `action` to a bench helper's control listener on 127.0.0.1:`port`; resolves with its JSON answer. */
export async function controlCall<T>(helper: string, port: number | string, action: string): Promise<T> {
  const res = await fetch(`http://127.0.0.1:${port}/${action}`, { method: "POST" });
  if (res.status !== 200) throw new Error(`${helper} /${action}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

export async function probe(): Promise<Probe> {
  const port = await freePort();
  return {
    env: {
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --import ${loader()}`.trim(),
      BENCH_PROBE_INHERITED_NODE_OPTIONS: process.env.NODE_OPTIONS ?? "",
      BENCH_PROBE_PORT: String(port),
    },
    call: <T>(action: string) => controlCall<T>("bench probe", port, action),
  };
}
