// Row (a)'s "own work": the broker's CPU per cached tools/call above the bare Koa + undici proxy
// (the floor), in rounds where both run back to back. Measured once each, minutes apart, the
// difference spread 18-176 µs between runs of the same code on this machine (README): the pace of
// the shared cores moves between the two measurements. Within a round it moves less; the order
// rotates between rounds, so that a drift inside a round favours no side. With BENCH_BASELINE, a
// broker of that build runs in the same rounds: its own work, and the change between the two.
import { median } from "./load.ts";
import { mcpSession, REQUESTS, toolCalls } from "./mcp-calls.ts";
import { cpuMs, startBareProxy, stop } from "./processes.ts";
import { pairedChange } from "./paired.ts";

const ROUNDS = Number(process.env.BENCH_OWN_WORK_ROUNDS ?? 10);
/** The target for the broker's own work per cached request. */
const TARGET_US = 60;

export interface Proxied {
  readonly pid: number | undefined;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly session: string;
}

/** CPU per request (µs, all threads) of the process behind `target` over one run of tool calls. */
async function cpuPerRequest(target: Proxied): Promise<number> {
  const before = cpuMs(target.pid);
  const run = await toolCalls(target.url, target.headers, target.session);
  return ((cpuMs(target.pid) - before) / run.requests) * 1000;
}

const range = (values: readonly number[]) => `${Math.min(...values).toFixed(0)} to ${Math.max(...values).toFixed(0)}`;

/**
 * Rows: the broker (already warm, at `broker`) against a bare Koa proxy started here in front of
 * `mcpUrl`; `baseline`, another build's broker (warm), in the same rounds.
 */
export async function pairedOwnWorkRows(mcpUrl: string, broker: Proxied, baseline?: Proxied): Promise<Array<[string, string]>> {
  const { child, url } = await startBareProxy(mcpUrl);
  try {
    const floor: Proxied = { pid: child.pid, url, headers: {}, session: await mcpSession(url, {}) };
    await toolCalls(floor.url, {}, floor.session); // warm-up
    const sides = baseline ? [floor, broker, baseline] : [floor, broker];
    const cpu = sides.map((): number[] => []);
    for (let round = 0; round < ROUNDS; round++) {
      // Each side first in turn.
      for (let k = 0; k < sides.length; k++) {
        const side = (round + k) % sides.length;
        cpu[side]!.push(await cpuPerRequest(sides[side]!));
      }
    }
    const [floors, brokers, baselines] = cpu as [number[], number[], number[] | undefined];
    const ownOf = (side: readonly number[]) => side.map((b, i) => b - floors[i]!);
    const own = ownOf(brokers);
    const figure = median(own);
    const rows: Array<[string, string]> = [
      [
        `    own work above the floor, ${ROUNDS} paired rounds`,
        `median ${figure.toFixed(0)} µs (rounds ${range(own)}; broker ${median(brokers).toFixed(0)} µs, floor ${median(floors).toFixed(0)} µs, ${REQUESTS} calls each); target ≤ ${TARGET_US} µs: ${figure <= TARGET_US ? "met" : "not met"}`,
      ],
    ];
    if (baselines) {
      const theirs = ownOf(baselines);
      rows.push([
        "      the baseline build in the same rounds",
        `own work median ${median(theirs).toFixed(0)} µs (rounds ${range(theirs)}); broker CPU against it ${pairedChange(baselines, brokers)}`,
      ]);
    }
    return rows;
  } finally {
    await stop(child);
  }
}
