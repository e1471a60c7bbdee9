// What holds a stdio child for the registry, in either era: a session (bridge-session.ts) or a
// warm stateless child (stateless-child.ts). Both are reaped the same way (idle since lastActive,
// their grant revoked, the broker stopping), both throttle the child by the responses open now,
// both give each request in flight a deadline, and both end once, whatever ended them. Those
// steps live here once; what the two eras carry differently (ids, streams, the handshake) stays in
// each subclass.
import type { ServerResponse } from "node:http";
import type { Logger } from "../logger.ts";
import type { StdioChild } from "./child-process.ts";
import { Throttle } from "./throttle.ts";

/**
 * What the /mcp front end does to the answer of a tools/list request before the client sees it
 * (the tool rules hide what this caller may not call); the bridges know only which answers those are.
 */
export type ListAnswerFilter = (answer: Record<string, unknown>) => Record<string, unknown>;

export interface SessionOwner {
  /** sessionOwnerKey of the caller who opened the session: who may use it. */
  readonly key: string;
  /** The grant whose revocation ends the session. */
  readonly grantId: string;
  /** The upstream token the child was started with (undefined: none was passed). */
  readonly upstreamToken: string | undefined;
  /** The connected-account token the child was started with (undefined: none was passed). */
  readonly connectionToken?: string | undefined;
}

/** Whether a child started for `started` may serve `now`: the same caller, with the same tokens. */
export function sameOwner(started: SessionOwner, now: SessionOwner): boolean {
  return started.key === now.key && started.upstreamToken === now.upstreamToken && started.connectionToken === now.connectionToken;
}

export interface ChildHolderOptions {
  /** How long the child may take to answer a request (MCP_STDIO_REQUEST_TIMEOUT_SECONDS). */
  readonly requestTimeoutMs: number;
}

/** The MCP SDKs' RequestTimeout code (implementation-defined range, as MCP names no timeout error). */
const REQUEST_TIMEOUT = -32001;

/** What the deadline of a request in flight needs to know of it. */
interface InFlight {
  readonly method: string;
  /** Clock time the request reached the child: its deadline counts from here. */
  readonly since: number;
}

export abstract class ChildHolder<Pending extends InFlight> {
  /** Clock time of the last request that reached the child (or of its last answer). */
  lastActive: number;
  /** Called once when the holder ends, whatever ended it. */
  onend: ((reason: string) => void) | undefined;
  /** Requests in flight inside the child, by the child-side id. */
  protected readonly pending = new Map<number, Pending>();
  protected readonly throttle: Throttle;
  protected ended = false;

  protected constructor(
    readonly child: StdioChild,
    readonly owner: SessionOwner,
    protected readonly log: Logger,
    protected readonly now: () => number,
    protected readonly options: ChildHolderOptions,
    /** The responses open now, that the child's messages go to: what backpressure watches. */
    responses: () => Iterable<ServerResponse>,
  ) {
    this.lastActive = now();
    this.throttle = new Throttle(child, responses, log);
    void child.exited.then((exit) => this.end(`the MCP server process exited (${exit.signal ?? `code ${exit.code}`})`));
  }

  /** No request in flight: the holder may be reaped when idle for long enough. */
  get idle(): boolean {
    return this.pending.size === 0;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Requests past their deadline at `now` (the registry asks every second). */
  expireOverdue(now: number): void {
    for (const [childId, pending] of [...this.pending]) if (now - pending.since >= this.options.requestTimeoutMs) this.expire(childId);
  }

  /** The child did not answer in time: the client gets an error, the child a cancellation. */
  protected abstract expire(childId: number): void;

  /** Logs a request that passed its deadline; the cancellation's reason and the client's error, worded once for both eras. */
  protected overdue(method: string): { readonly reason: string; readonly error: { readonly code: number; readonly message: string } } {
    const seconds = this.options.requestTimeoutMs / 1000;
    this.log.warn({ method, timeoutSeconds: seconds }, "stdio MCP server did not answer in time; the request was cancelled");
    return {
      reason: `no answer within ${seconds} s`,
      error: {
        code: REQUEST_TIMEOUT,
        message: `The MCP server did not answer within ${seconds} s (MCP_STDIO_REQUEST_TIMEOUT_SECONDS); the request was cancelled.`,
      },
    };
  }

  /**
   * Gives every request in flight its error as the holder ends (and closes what the era keeps
   * open); a promise only where there is something to wait for, so that onend is not delayed.
   */
  protected abstract abandon(reason: string): Promise<void> | void;

  /** Ends the holder: requests in flight get an error, onend is called, the child stopped. Idempotent. */
  async end(reason: string, graceMs = 2000): Promise<void> {
    if (this.ended) {
      await this.child.exited;
      return;
    }
    this.ended = true;
    const abandoned = this.abandon(reason);
    if (abandoned) await abandoned;
    this.onend?.(reason);
    if (this.child.running) await this.child.stop(graceMs);
  }
}
