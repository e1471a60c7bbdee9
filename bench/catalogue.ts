// Row (k): what a catalogue of many servers costs the /mcp path. The broker's CPU per tools/call at
// the only server of a catalogue of one (the environment's, at /mcp) and at one server of a file
// catalogue of 50 (/mcp/s25), all fronting the same MCP server. Rounds alternate between the two
// brokers, in turn first, so that a change of load on the shared cores weighs on each.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { ChildProcess } from "node:child_process";
import { median } from "./load.ts";
import { mcpSession, toolCalls } from "./mcp-calls.ts";
import { cpuMs, stop } from "./processes.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";

export type StartBroker = (db: string, extra: Record<string, string>) => Promise<{ child: ChildProcess; url: string }>;

const SERVERS = 50;
const ROUNDS = Number(process.env.BENCH_CATALOGUE_ROUNDS ?? 7);

interface Subject {
  readonly name: string;
  readonly child: ChildProcess;
  readonly calls: () => ReturnType<typeof toolCalls>;
  readonly cpuUs: number[];
}

export async function catalogueRows(start: StartBroker, mcpUrl: string): Promise<Array<[string, string]>> {
  const dir = mkdtempSync(path.join(tmpdir(), "mab-bench-catalogue-"));
  const file = path.join(dir, "broker.yaml");
  const servers = Array.from({ length: SERVERS }, (_, i) => `  - name: s${i + 1}\n    url: ${mcpUrl}\n`);
  writeFileSync(file, `servers:\n${servers.join("")}`);
  const subjects: Subject[] = [];
  try {
    const kinds: Array<{ name: string; env: Record<string, string>; path: string }> = [
      { name: "one", env: {}, path: "/mcp" },
      { name: "fifty", env: { BROKER_CONFIG: file, MCP_SERVER_URL: "" }, path: `/mcp/s${SERVERS / 2}` },
    ];
    for (const kind of kinds) {
      const broker = await start(`catalogue-${kind.name}.db`, kind.env);
      const url = `${broker.url}${kind.path}`;
      const { tokens } = await obtainTokens(broker.url, { user: "bench", resource: url });
      const auth = { authorization: `Bearer ${tokens.access_token}` };
      const session = await mcpSession(url, auth);
      const calls = () => toolCalls(url, auth, session);
      // Warm-up twice: the validation cache, then the optimizing compiler.
      await calls();
      await calls();
      subjects.push({ name: kind.name, child: broker.child, calls, cpuUs: [] });
    }
    for (let round = 0; round < ROUNDS; round++) {
      const order = subjects.map((_, i) => subjects[(i + round) % subjects.length]!);
      for (const s of order) {
        const before = cpuMs(s.child.pid);
        const run = await s.calls();
        s.cpuUs.push(((cpuMs(s.child.pid) - before) / run.requests) * 1000);
      }
    }
    const spread = (s: Subject) => `${Math.min(...s.cpuUs).toFixed(0)}–${Math.max(...s.cpuUs).toFixed(0)}`;
    const [one, fifty] = subjects as [Subject, Subject];
    const change = (median(fifty.cpuUs) / median(one.cpuUs) - 1) * 100;
    return [
      [
        `(k) tools/call at one server of ${SERVERS} (BROKER_CONFIG) vs the only one, broker CPU per request`,
        `${median(fifty.cpuUs).toFixed(0)} µs (rounds ${spread(fifty)}) vs ${median(one.cpuUs).toFixed(0)} µs (rounds ${spread(one)}): ${change >= 0 ? "+" : ""}${change.toFixed(1)}%; target ≤ +5%`,
      ],
    ];
  } finally {
    for (const s of subjects) await stop(s.child);
    rmSync(dir, { recursive: true, force: true });
  }
}
