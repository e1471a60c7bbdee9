// Reading what bench/broker-probe.ts answers: the bytes a window allocated, its collections, and
// the sampling heap profile (V8's tree of call frames with the bytes each allocated itself),
// summed per function and per package so that a row can say where the bytes come from.
import path from "node:path";
import { root } from "./processes.ts";

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

export interface ProfileNode {
  readonly callFrame: CallFrame;
  readonly selfSize: number;
  readonly children: readonly ProfileNode[];
}

/** The probe's answer to alloc/stop. */
export interface AllocationWindow {
  readonly allocatedBytes: number;
  readonly gcs: Record<string, { count: number; us: number }>;
  readonly sampledBytes?: number;
  readonly profile?: { readonly head: ProfileNode };
}

/** The collections of some windows, per 1,000 requests, with each kind's mean pause: "3.4 Scavenge (3.1 ms each), …". */
export function collectionsPer1000(windows: readonly Pick<AllocationWindow, "gcs">[], requests: number): string {
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
  return collections.join(", ") || "none";
}

/** A file's name, short: the project's files from its root, a package's from node_modules/. */
function shortFile(url: string): string {
  const file = url.startsWith("file://") ? path.relative(root, new URL(url).pathname) : url;
  return file.includes("node_modules/") ? file.slice(file.lastIndexOf("node_modules/") + "node_modules/".length) : file;
}

/** Whose code a file is: the broker's (dist/), Node's own, or a package's. */
function origin(file: string): string {
  if (file.startsWith("dist/")) return "broker (dist/)";
  if (file.startsWith("node:")) return "Node (node:)";
  const parts = file.split("/");
  return parts[0]!.startsWith("@") ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

export interface FunctionBytes {
  /** The function and where it is; a V8 builtin (no script: push, bind, JSON.parse) with the function that called it. */
  readonly where: string;
  /** Whose code: the broker's, Node's, a package's (a builtin's caller's). */
  readonly origin: string;
  readonly bytes: number;
}

/** Bytes per function (self size, summed over every call path it was reached by), most first. */
export function bytesByFunction(head: ProfileNode): FunctionBytes[] {
  const into = new Map<string, FunctionBytes>();
  const add = (node: ProfileNode, caller: { where: string; origin: string }) => {
    const { functionName, url, lineNumber } = node.callFrame;
    const name = functionName || "(anonymous)";
    const file = shortFile(url);
    const here = file ? { where: `${name} ${file}:${lineNumber + 1}`, origin: origin(file) } : { where: `${name} ← ${caller.where}`, origin: caller.origin };
    if (node.selfSize > 0) {
      const sum = into.get(here.where);
      into.set(here.where, { ...here, bytes: (sum?.bytes ?? 0) + node.selfSize });
    }
    // A builtin's callees are attributed to the script function above it too.
    for (const child of node.children) add(child, file ? here : caller);
  };
  add(head, { where: "(V8)", origin: "V8" });
  return [...into.values()].sort((a, b) => b.bytes - a.bytes);
}

/** The same bytes per package (or the broker, Node, V8), most first. */
export function bytesByOrigin(byFunction: readonly FunctionBytes[]): Array<[string, number]> {
  const into = new Map<string, number>();
  for (const f of byFunction) into.set(f.origin, (into.get(f.origin) ?? 0) + f.bytes);
  return [...into].sort((a, b) => b[1] - a[1]);
}

/** "origin share%, …": where the bytes come from by package. */
export function originShares(byFunction: readonly FunctionBytes[], total: number): string {
  return bytesByOrigin(byFunction)
    .map(([o, bytes]) => `${o} ${((bytes / total) * 100).toFixed(1)}%`)
    .join(", ");
}

/** Rows listing the first `top` functions: bytes per `unit` (a request, a stream) and share of `total`. */
export function topRows(label: string, byFunction: readonly FunctionBytes[], top: number, units: number, total: number): Array<[string, string]> {
  return byFunction.slice(0, top).map(({ where, bytes }, i): [string, string] => {
    const share = `${((bytes / total) * 100).toFixed(1)}%`;
    return [i === 0 ? label : "", `${(bytes / units).toFixed(0).padStart(5)} B ${share.padStart(5)}  ${where}`];
  });
}
