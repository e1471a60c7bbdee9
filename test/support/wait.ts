// Waiting in tests: on a condition (polled, for events that happen in another process or on
// another connection and raise nothing we can await) or on a promise, each with a deadline that
// fails the test with a message naming what never happened — never a fixed sleep, and never an
// assertion on how long something took (timings belong in the bench).
import { setTimeout as pause } from "node:timers/promises";

const POLL_MS = 10;

/** Resolves once `condition` holds; rejects naming `what` if it still does not after `timeoutMs`. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await pause(POLL_MS);
  }
}

/** `promise`'s value; rejects naming `what` unless it settles within `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
