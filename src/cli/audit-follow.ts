// `audit --follow`: the audit trail as it grows, like `tail -f`. The trail is read again every
// interval from a little before the newest event printed, and what was printed already is skipped:
// an event committed a moment after a newer one (another connection, another instance) still shows.
import { setTimeout as sleep } from "node:timers/promises";
import type { AuditFilter, AuditRecord } from "../grants/audit-log.ts";

/** How far back each read starts before the newest event printed. */
const LOOKBACK_MS = 5000;
const PAGE = 1000;

export interface FollowOptions {
  /** Reads events at or after `since`, oldest first, at most `limit`. */
  readonly readForward: (filter: AuditFilter) => Promise<AuditRecord[]>;
  /** The filter the command was given (its `since` and `limit` are the follower's own). */
  readonly filter: Omit<AuditFilter, "since" | "limit">;
  /** The events already printed, and where following starts when there are none. */
  readonly printed: readonly AuditRecord[];
  readonly start: Date;
  readonly intervalMs: number;
  readonly stop: AbortSignal;
  print(event: AuditRecord): void;
}

export async function followAuditLog(options: FollowOptions): Promise<void> {
  const seen = new Map<string, number>();
  let newest = options.start.getTime();
  for (const event of options.printed) {
    seen.set(event.id, event.at.getTime());
    newest = Math.max(newest, event.at.getTime());
  }
  let from = newest - LOOKBACK_MS;
  while (!options.stop.aborted) {
    const page = await options.readForward({ ...options.filter, since: new Date(from), limit: PAGE });
    for (const event of page) {
      if (seen.has(event.id)) continue;
      seen.set(event.id, event.at.getTime());
      newest = Math.max(newest, event.at.getTime());
      options.print(event);
    }
    // A full page: read on from its last event at once.
    if (page.length === PAGE) {
      from = page.at(-1)!.at.getTime();
      continue;
    }
    from = newest - LOOKBACK_MS;
    for (const [id, at] of seen) if (at < from) seen.delete(id);
    try {
      await sleep(options.intervalMs, undefined, { signal: options.stop });
    } catch {
      // Stopped while waiting.
    }
  }
}
