// Streams one readable into one writable with backpressure, as stream.pipeline does, but without
// its per-call AbortController (Node's pipeline aborts it on every normal finish, and building the
// AbortError, a DOMException with a stack, cost ~6% of the proxy's CPU per request), and without
// Readable.pipe: its bookkeeping for many destinations kept about 2 KB per open event stream
// (bench row (s)). Five listeners, removed when it settles.
import type { Readable, Writable } from "node:stream";

const ignore = () => {};

/**
 * Calls `done()` when `destination` has finished; `done(err)` (after destroying both sides) when
 * either side fails or `destination` closes before the end. A callback, not a promise: an event
 * stream relayed for hours keeps what waits for its end, and a promise chain (the promise, its
 * resolvers, each then's reaction and promise) kept about 0.5 KB more per stream (bench row (s)).
 * A destination ended by someone else (a shutdown ending an event stream with its own last
 * events, open-streams.ts) takes no more of the source.
 */
export function pump(source: Readable, destination: Writable, done: (err?: Error) => void): void {
  let settled = false;
  const onData = (chunk: Buffer) => {
    if (destination.writableEnded) return;
    if (!destination.write(chunk)) source.pause();
  };
  const onDrain = () => source.resume();
  const onEnd = () => {
    if (!destination.writableEnded) destination.end();
  };
  const settle = (err?: unknown) => {
    if (settled) return;
    settled = true;
    source.off("data", onData).off("end", onEnd).off("error", settle);
    destination.off("drain", onDrain).off("error", settle).off("close", onClose);
    if (err === undefined) return done();
    // Late errors from a side being torn down have nowhere useful to go; they must not crash.
    source.on("error", ignore);
    destination.on("error", ignore);
    source.destroy();
    destination.destroy();
    done(err instanceof Error ? err : new Error(String(err)));
  };
  // "close" follows "finish" (a ServerResponse's, and any writable's that emits close): one
  // listener tells both ends apart. `on`, not `once`: settle removes them, and each `once` wrapper
  // is kept for as long as an event stream stays open (bench row (s)).
  const onClose = () => settle(destination.writableFinished ? undefined : new Error("the destination closed before the end of the stream"));
  destination.on("drain", onDrain).on("error", settle).on("close", onClose);
  source.on("end", onEnd).on("error", settle).on("data", onData);
}
