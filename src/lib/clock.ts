// The time the grants code decides by (token and code expiry, grant deadlines, re-check windows,
// consent expiry, how long a cached validation holds). Injected, so that tests move time forward
// instead of sleeping; production uses the system clock.

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** The clock's current time as a Date. */
export function dateOf(clock: Clock): Date {
  return new Date(clock.now());
}

/**
 * A clock that stands still until told to move: deterministic time for tests (and for anything
 * that replays events). Starts at the given time, by default the system time at creation.
 */
export class ManualClock implements Clock {
  private ms: number;

  constructor(start: number | Date = Date.now()) {
    this.ms = typeof start === "number" ? start : start.getTime();
  }

  now(): number {
    return this.ms;
  }

  advance(ms: number): void {
    if (!(ms >= 0)) throw new RangeError("a clock only moves forward");
    this.ms += ms;
  }
}
