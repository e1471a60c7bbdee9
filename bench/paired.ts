// Comparing two builds (or settings) from rounds in which both ran back to back: each round's own
// ratio, then their median. When the machine's pace moves between rounds, the ratio of two medians
// moves with it; a round's own ratio moves less. It still does here: two identical builds read up
// to about ±6% (README, rows (d) and (h)).
import { median } from "./load.ts";

/** `b` against `a` as a signed percentage: "+3.2%". */
export function change(a: number, b: number): string {
  return `${b >= a ? "+" : ""}${((b / a - 1) * 100).toFixed(1)}%`;
}

/** `ours` against `baseline`, round by round (same length, same order): the median change and the rounds' spread. */
export function pairedChange(baseline: readonly number[], ours: readonly number[]): string {
  const ratios = ours.map((x, i) => x / baseline[i]!);
  return `${change(1, median(ratios))} (median of ${ratios.length} rounds' ratios, ${change(1, Math.min(...ratios))} to ${change(1, Math.max(...ratios))})`;
}
