// One core's pauses: spins on the clock for PAUSE_METER_SECONDS and counts the gaps between two
// readings, which on an otherwise idle machine are time this process did not run (the host did not
// schedule the virtual CPU, or the guest kernel ran something else). Prints `PAUSES <json>` and exits.
// bench/machine-pauses.ts runs one per core, together, with V8's collector on this thread alone
// (--single-threaded-gc): a helper thread of one meter would otherwise take the other's core.
// The clock is read about once a microsecond, not as fast as it can be: each reading allocates a
// heap number, and read flat out they filled the young generation 90 times a second.
const seconds = Number(process.env.PAUSE_METER_SECONDS ?? 3);
/** Gap thresholds, in ms. */
export const PAUSE_THRESHOLDS_MS = [0.5, 1, 2] as const;

let work = 1;

function spin(ms: number, counts: number[]): number {
  const end = performance.now() + ms;
  let last = performance.now();
  let longest = 0;
  for (;;) {
    for (let k = 0; k < 500; k++) work = (work * 1103515245 + 12345) | 0;
    const now = performance.now();
    const gap = now - last;
    last = now;
    if (gap > longest) longest = gap;
    for (let i = 0; i < PAUSE_THRESHOLDS_MS.length; i++) if (gap > PAUSE_THRESHOLDS_MS[i]!) counts[i]!++;
    if (now >= end) return longest;
  }
}

if (process.env.PAUSE_METER_SECONDS !== undefined) {
  // First compiled, so that what is counted is the machine's, not the compiler's.
  spin(200, [0, 0, 0]);
  const counts = PAUSE_THRESHOLDS_MS.map(() => 0);
  const longest = spin(seconds * 1000, counts);
  process.stdout.write(`PAUSES ${JSON.stringify({ seconds, counts, longest, work: work & 1 })}\n`);
}
