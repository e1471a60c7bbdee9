// What cuts one request to the MCP server (the client went away, a deadline, the shutdown) and
// why. An EventEmitter, which undici takes as a request's signal as it takes an AbortSignal
// (Dispatcher.request: "signal: AbortSignal | EventEmitter"): Node 20's AbortController and its
// EventTarget cost about 2 KB and a few microseconds per request (bench row (m)).
import { EventEmitter } from "node:events";

export class ExchangeAbort extends EventEmitter {
  aborted = false;
  /** Why it was cut; undefined until then. */
  reason: unknown = undefined;

  /**
   * "abort" is emitted at most once, so a listener needs no once-wrapper: undici's request listens
   * with once(), and the wrapper (a bound function and its state) was kept for as long as a GET
   * stream stayed open (bench row (s)). removeListener finds the listener as it was given.
   */
  override once(event: string | symbol, listener: (...args: unknown[]) => void): this {
    return event === "abort" ? this.on(event, listener) : super.once(event, listener);
  }

  /** Cuts the request (once: a later reason is ignored); its listeners hear "abort". */
  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.emit("abort");
  }
}

/** A signal a body reader listens to: an AbortSignal, or the proxy's ExchangeAbort. */
export type CutSignal = AbortSignal | ExchangeAbort;

/** Calls `listener` once when `signal` is cut; returns what removes it. */
export function whenCut(signal: CutSignal, listener: () => void): () => void {
  if (signal instanceof ExchangeAbort) {
    signal.once("abort", listener);
    return () => signal.off("abort", listener);
  }
  signal.addEventListener("abort", listener, { once: true });
  return () => signal.removeEventListener("abort", listener);
}
