// Row (q): how often the machine itself paused the bench's processes, measured at the start and at
// the end of a run. On this 2-core virtual machine a one-client block's p99 is its tenth slowest
// call in a thousand, and a pause of the host longer than a millisecond a few times a second sets
// it whatever the code does (README, rows (a) and (a')). The figure says how quiet the run was:
// one process spinning on the clock per core, idle otherwise, counting the gaps between readings.
import { availableParallelism } from "node:os";
import { PAUSE_THRESHOLDS_MS } from "./pause-meter.ts";
import { startProcess } from "./processes.ts";

interface CorePauses {
  readonly seconds: number;
  readonly counts: readonly number[];
  readonly longest: number;
}

const SECONDS = 3;

/** Runs one pause meter per core at once; what each saw. */
export async function machinePauses(): Promise<CorePauses[]> {
  const meters = Array.from({ length: availableParallelism() }, () =>
    startProcess(["--single-threaded-gc", "bench/pause-meter.ts"], { PAUSE_METER_SECONDS: String(SECONDS) }, /PAUSES (\{.*\})/),
  );
  const done = await Promise.all(meters);
  await Promise.all(done.map(({ child }) => (child.exitCode !== null ? undefined : new Promise((resolve) => child.once("exit", resolve)))));
  return done.map(({ match }) => JSON.parse(match[1]!) as CorePauses);
}

/** "per core per second: > 0.5 ms a, > 1 ms b, > 2 ms c; longest x ms" over all the cores' meters. */
export function pauseFigures(cores: readonly CorePauses[]): string {
  const coreSeconds = cores.reduce((sum, c) => sum + c.seconds, 0);
  const rates = PAUSE_THRESHOLDS_MS.map((ms, i) => `> ${ms} ms ${(cores.reduce((sum, c) => sum + c.counts[i]!, 0) / coreSeconds).toFixed(1)}`);
  return `per core per second: ${rates.join(", ")}; longest ${Math.max(...cores.map((c) => c.longest)).toFixed(1)} ms (${cores.length} cores, ${SECONDS} s)`;
}

export function machinePauseRows(atStart: readonly CorePauses[], atEnd: readonly CorePauses[]): Array<[string, string]> {
  return [
    ["(q) the machine's pauses at the start of the run", pauseFigures(atStart)],
    ["    and at its end", pauseFigures(atEnd)],
  ];
}
