// Row (h): MCP 2026-07-28 stateless tools/call through the broker, next to 2025 tools/call in a
// session, against the same SDK v2 server (it serves both eras). The broker's CPU per request is
// the figure to compare: the stateless request carries the mirrored headers the broker checks
// against the body, and no session to look up.
import type { ChildProcess } from "node:child_process";
import { median, type LoadResult } from "./load.ts";
import { CONCURRENCY, mcpSession, REQUESTS, statelessToolCalls, toolCalls } from "./mcp-calls.ts";
import { cpuMs, startBareProxy, startProcess, stop } from "./processes.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";

/** Paired rounds of both kinds: enough for a median that one busy moment of the machine does not move. */
const ROUNDS = 5;

type StartBroker = (recheck: string, db: string, extra?: Record<string, string>) => Promise<{ child: ChildProcess; url: string }>;

/** Broker CPU per request (µs) of one run of `load`, and the run. */
async function measured(pid: number | undefined, load: () => Promise<LoadResult>): Promise<{ run: LoadResult; cpuUs: number }> {
  const before = cpuMs(pid);
  const run = await load();
  return { run, cpuUs: ((cpuMs(pid) - before) / run.requests) * 1000 };
}

/** The floor (bench/bare-proxy.ts) in front of the same server: CPU per request of both kinds, at 50 clients. */
async function bareFloor(serverUrl: string): Promise<{ session: number; stateless: number }> {
  const { child, url } = await startBareProxy(serverUrl);
  try {
    const session = await mcpSession(url, {});
    await toolCalls(url, {}, session);
    await statelessToolCalls(url, {});
    const s = [];
    const m = [];
    for (let round = 0; round < 2; round++) {
      s.push((await measured(child.pid, () => toolCalls(url, {}, session))).cpuUs);
      m.push((await measured(child.pid, () => statelessToolCalls(url, {}))).cpuUs);
    }
    return { session: (s[0]! + s[1]!) / 2, stateless: (m[0]! + m[1]!) / 2 };
  } finally {
    await stop(child);
  }
}

export async function modernRows(startBroker: StartBroker, fmt: (r: LoadResult) => string): Promise<Array<[string, string]>> {
  const { child: server, match } = await startProcess(["bench/serve-mcp-v2.ts"], {}, /MCP_URL (\S+)/);
  try {
    const broker = await startBroker("30", "modern.db", { MCP_SERVER_URL: match[1]! });
    try {
      const { tokens } = await obtainTokens(broker.url, { user: "bench" });
      const auth = { authorization: `Bearer ${tokens.access_token}` };
      const url = `${broker.url}/mcp`;
      const session = await mcpSession(url, auth);
      const sessionCalls = () => toolCalls(url, auth, session);
      const statelessCalls = () => statelessToolCalls(url, auth);
      // Warm-up of both paths (validation cache, JIT), then ROUNDS rounds in alternation. On two
      // shared cores one run's CPU per request moves by ±20% with what else the machine does, so
      // the figure is the median of each round's ratio (stateless over session, run back to back),
      // not a ratio of two single runs.
      await sessionCalls();
      await statelessCalls();
      const sessionRuns: Array<{ run: LoadResult; cpuUs: number }> = [];
      const statelessRuns: Array<{ run: LoadResult; cpuUs: number }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        sessionRuns.push(await measured(broker.child.pid, sessionCalls));
        statelessRuns.push(await measured(broker.child.pid, statelessCalls));
      }
      const sessionCpu = median(sessionRuns.map((r) => r.cpuUs));
      const statelessCpu = median(statelessRuns.map((r) => r.cpuUs));
      const ratio = median(statelessRuns.map((r, i) => r.cpuUs / sessionRuns[i]!.cpuUs));
      // The target's comparison: both kinds at the same throughput. Closed loop, the SDK v2 server
      // answers stateless calls slower (it builds a server per request), so fewer of them share a
      // turn of the broker's event loop and each costs more whatever the broker does with it — the
      // bare proxy below pays as much more. Paced at 80% of the slower kind's rate, both get the
      // same turns, and the CPU per request is the work each kind asks of the broker.
      const rate = 0.8 * Math.min(median(sessionRuns.map((r) => r.run.rps)), median(statelessRuns.map((r) => r.run.rps)));
      const pacedRatios: number[] = [];
      const paced = { session: [] as number[], stateless: [] as number[] };
      for (let round = 0; round < ROUNDS; round++) {
        const s = await measured(broker.child.pid, () => toolCalls(url, auth, session, CONCURRENCY, REQUESTS, rate));
        const m = await measured(broker.child.pid, () => statelessToolCalls(url, auth, CONCURRENCY, REQUESTS, rate));
        paced.session.push(s.cpuUs);
        paced.stateless.push(m.cpuUs);
        pacedRatios.push(m.cpuUs / s.cpuUs);
      }
      const pacedRatio = median(pacedRatios);
      // One client alone, for information: the broker's loop sleeps between requests, and how the
      // server's answer arrives (a session's as an event stream, a stateless one as JSON) weighs on
      // each request; no floor is measured for it.
      const sessionAlone = await measured(broker.child.pid, () => toolCalls(url, auth, session, 1));
      const statelessAlone = await measured(broker.child.pid, () => statelessToolCalls(url, auth, 1));
      const change = (a: number, b: number) => `${((b / a - 1) * 100).toFixed(1)}%`;
      // What the answers of the two eras cost any proxy (the SDK v2 server answers a session's call
      // as SSE, a stateless one as JSON): the broker's own work is what it adds above that floor.
      const floor = await bareFloor(match[1]!);
      return [
        ["(h) SDK v2 server: 2025-11-25 tools/call in a session, through broker", fmt(sessionRuns.at(-1)!.run)],
        ["    broker CPU per request (median of the rounds); one client alone", `${sessionCpu.toFixed(0)} µs; ${sessionAlone.cpuUs.toFixed(0)} µs`],
        ["(h) SDK v2 server: 2026-07-28 stateless tools/call, through broker", fmt(statelessRuns.at(-1)!.run)],
        [
          "    broker CPU per request (median of the rounds); one client alone",
          `${statelessCpu.toFixed(0)} µs (${((ratio - 1) * 100).toFixed(1)}% against the session's, median of ${ROUNDS} paired rounds: the server's pace, see the floor); ${statelessAlone.cpuUs.toFixed(0)} µs (${change(sessionAlone.cpuUs, statelessAlone.cpuUs)})`,
        ],
        [
          `    same throughput (both paced at ${rate.toFixed(0)} req/s), session / stateless`,
          `${median(paced.session).toFixed(0)} µs / ${median(paced.stateless).toFixed(0)} µs: ${((pacedRatio - 1) * 100).toFixed(1)}% (median of ${ROUNDS} paired rounds); target ≤ +10%`,
        ],
        [
          "    bare proxy floor, session / stateless",
          `${floor.session.toFixed(0)} µs / ${floor.stateless.toFixed(0)} µs; the broker's own work ${(sessionCpu - floor.session).toFixed(0)} µs / ${(statelessCpu - floor.stateless).toFixed(0)} µs (${change(sessionCpu - floor.session, statelessCpu - floor.stateless)})`,
        ],
      ];
    } finally {
      await stop(broker.child);
    }
  } finally {
    await stop(server);
  }
}
