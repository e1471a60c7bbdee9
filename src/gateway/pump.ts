// Streams one readable into one writable with backpressure, as stream.pipeline does, but without
// its per-call AbortController: Node's pipeline aborts that controller on every normal finish,
// and building the AbortError (a DOMException with a stack) cost ~6% of the proxy's CPU per request.
import type { Readable, Writable } from "node:stream";

/**
 * Resolves when `destination` has finished; rejects (and destroys both sides) when either side
 * fails or `destination` closes before the end.
 */
const ignore = () => {};

export function pump(source: Readable, destination: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (err?: unknown) => {
      if (settled) return;
      settled = true;
      source.off("error", settle);
      destination.off("error", settle);
      destination.off("finish", onFinish);
      destination.off("close", onClose);
      if (err === undefined) return resolve();
      // Late errors from a side being torn down have nowhere useful to go; they must not crash.
      source.on("error", ignore);
      destination.on("error", ignore);
      source.destroy();
      destination.destroy();
      reject(err instanceof Error ? err : new Error(String(err)));
    };
    const onFinish = () => settle();
    const onClose = () => settle(destination.writableFinished ? undefined : new Error("the destination closed before the end of the stream"));
    source.once("error", settle);
    destination.once("error", settle);
    destination.once("finish", onFinish);
    destination.once("close", onClose);
    source.pipe(destination);
  });
}
