// Backpressure from HTTP clients to a stdio child: while any response the child's messages go to
// has more queued than its socket takes (the client reads slowly, or not at all), the child's
// stdout is not read, so that the child's own writes wait instead of the broker holding what it
// writes. Reading resumes once every such response has drained or closed.
import type { ServerResponse } from "node:http";
import type { Logger } from "../logger.ts";
import type { StdioChild } from "./child-process.ts";

export class Throttle {
  constructor(
    private readonly child: StdioChild,
    /** The responses open now. */
    private readonly responses: () => Iterable<ServerResponse>,
    private readonly log: Logger,
  ) {}

  /** Called after every message handed to a response. */
  check(): void {
    if (this.child.paused || !this.child.running || !this.waitForDrain()) return;
    this.child.pause();
    this.log.debug("a client reads slower than the stdio MCP server writes; reading from the server paused");
  }

  /** Waits for a response that has too much queued, then for the next; resumes when none has. */
  private waitForDrain(): boolean {
    let full: ServerResponse | undefined;
    for (const res of this.responses()) {
      if (res.writableNeedDrain && !res.destroyed) {
        full = res;
        break;
      }
    }
    if (!full) return false;
    const next = () => {
      full.off("drain", next);
      full.off("close", next);
      if (!this.waitForDrain()) this.child.resume();
    };
    full.once("drain", next);
    full.once("close", next);
    return true;
  }
}
