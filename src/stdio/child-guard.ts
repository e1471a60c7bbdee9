// Everything that makes stdio children die with the broker: the watchdog for a broker that dies
// (watchdog.ts), the ledger and the start-up check for what even the watchdog could not stop
// (child-ledger.ts). StdioChild tells it about each child the moment it is spawned and again once
// its process group is gone.
import type { Logger } from "../logger.ts";
import { CHILD_MARKER_VARIABLE as CHILD_MARKER, ChildLedger, reapLeftovers } from "./child-ledger.ts";
import { Watchdog } from "./watchdog.ts";

export interface ChildGuard {
  /** The `NAME=value` every child's environment carries, so that its descendants can be found. */
  readonly marker: { readonly variable: string; readonly value: string };
  /** A child (and its process group) was spawned with this pid. Synchronous. */
  watch(pid: number): void;
  /** That child's process group is gone. */
  forget(pid: number): void;
  /** At an orderly stop, once every child is stopped. */
  close(): void;
}

/**
 * Settles what brokers gone from `ledgerDir` left behind, then guards this broker's children.
 * `graceMs`: SIGTERM to SIGKILL when the watchdog acts.
 */
export function openChildGuard(ledgerDir: string, log: Logger, graceMs?: number): ChildGuard {
  reapLeftovers(ledgerDir, log);
  const ledger = new ChildLedger(ledgerDir, log);
  const watchdog = new Watchdog(log, graceMs);
  return {
    marker: { variable: CHILD_MARKER, value: ledger.marker },
    watch(pid) {
      ledger.add(pid);
      watchdog.watch(pid);
    },
    forget(pid) {
      watchdog.forget(pid);
      ledger.remove(pid);
    },
    close() {
      watchdog.close();
      ledger.close();
    },
  };
}
