// Row (t): what OpenTelemetry tracing costs the /mcp path. The broker's CPU per tools/call with
// tracing off (the default: no SDK loaded), and with it on at 100% sampling, every span exported
// over OTLP/HTTP (protobuf, the default) to a receiver in this process. With BENCH_BASELINE set to
// another checkout of the project (built, with node_modules), its broker runs the same calls: the
// figure to compare "off" with, the same code before tracing existed. Rounds alternate between the
// brokers, in turn first, so that a change of load on the shared cores weighs on each.
import { change, pairedChange } from "./paired.ts";
import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { mcpSession, toolCalls } from "./mcp-calls.ts";
import { cpuMs, stop } from "./processes.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";

export type StartBrokerAt = (db: string, extra: Record<string, string>, entry?: string) => Promise<{ child: ChildProcess; url: string }>;

const ROUNDS = Number(process.env.BENCH_TRACING_ROUNDS ?? 5);

/** An OTLP/HTTP receiver that takes every export and keeps count: requests and bytes. */
async function startSink(): Promise<{ endpoint: string; exports: () => { requests: number; bytes: number }; close(): Promise<void> }> {
  let requests = 0;
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on("data", (c: Buffer) => {
      bytes += c.length;
    });
    req.on("end", () => {
      requests++;
      res.writeHead(200, { "content-type": "application/x-protobuf" }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    exports: () => ({ requests, bytes }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Subject {
  readonly name: string;
  readonly child: ChildProcess;
  readonly calls: () => ReturnType<typeof toolCalls>;
  readonly cpuUs: number[];
}

export async function tracingRows(start: StartBrokerAt): Promise<Array<[string, string]>> {
  const sink = await startSink();
  const subjects: Subject[] = [];
  try {
    const kinds: Array<{ name: string; env: Record<string, string>; entry?: string }> = [
      { name: "off", env: {} },
      { name: "on", env: { OTEL_EXPORTER_OTLP_ENDPOINT: sink.endpoint, OTEL_TRACES_SAMPLER: "always_on" } },
    ];
    const baseline = process.env.BENCH_BASELINE;
    if (baseline) kinds.push({ name: "baseline", env: {}, entry: path.join(path.resolve(baseline), "dist/main.js") });
    for (const kind of kinds) {
      const broker = await start(`tracing-${kind.name}.db`, kind.env, kind.entry);
      const { tokens } = await obtainTokens(broker.url, { user: "bench" });
      const auth = { authorization: `Bearer ${tokens.access_token}` };
      const url = `${broker.url}/mcp`;
      const session = await mcpSession(url, auth);
      const calls = () => toolCalls(url, auth, session);
      // Warm-up twice: the validation cache, then the optimizing compiler.
      await calls();
      await calls();
      subjects.push({ name: kind.name, child: broker.child, calls, cpuUs: [] });
    }
    let exported = { requests: 0, bytes: 0 };
    let tracedRequests = 0;
    for (let round = 0; round < ROUNDS; round++) {
      // Each round starts with the next broker: none is always the one after another's export burst.
      const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!);
      for (const s of order) {
        const before = cpuMs(s.child.pid);
        const exportsBefore = sink.exports();
        const run = await s.calls();
        s.cpuUs.push(((cpuMs(s.child.pid) - before) / run.requests) * 1000);
        if (s.name === "on") {
          const after = sink.exports();
          exported = { requests: exported.requests + after.requests - exportsBefore.requests, bytes: exported.bytes + after.bytes - exportsBefore.bytes };
          tracedRequests += run.requests;
        }
      }
    }
    // The median round: a round that shared the cores with a burst of other work is an outlier, not a trend.
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const cpu = Object.fromEntries(subjects.map((s) => [s.name, median(s.cpuUs)]));
    const spread = (s: Subject) => `${Math.min(...s.cpuUs).toFixed(0)}–${Math.max(...s.cpuUs).toFixed(0)}`;
    const off = subjects.find((s) => s.name === "off")!;
    const on = subjects.find((s) => s.name === "on")!;
    const base = subjects.find((s) => s.name === "baseline");
    return [
      [
        "(t) tracing off (no OTEL_*), broker CPU per request",
        `median ${cpu.off!.toFixed(0)} µs (rounds ${spread(off)})${base ? `; before tracing existed (BENCH_BASELINE) ${cpu.baseline!.toFixed(0)} µs (rounds ${spread(base)}): off is ${pairedChange(base.cpuUs, off.cpuUs)}` : "; set BENCH_BASELINE to a built checkout of the code before, to compare"}`,
      ],
      [
        "(t) tracing on, 100% sampled, OTLP/HTTP protobuf to a local receiver",
        `median ${cpu.on!.toFixed(0)} µs (rounds ${spread(on)}): +${(cpu.on! - cpu.off!).toFixed(0)} µs per request (${change(cpu.off!, cpu.on!)}); ${(exported.bytes / tracedRequests).toFixed(0)} bytes exported per request in ${exported.requests} exports`,
      ],
    ];
  } finally {
    for (const s of subjects) await stop(s.child);
    await sink.close();
  }
}
