// The HTTP answer to one MCP 2026-07-28 request (Streamable HTTP without sessions): a single JSON
// object when the answer comes before anything else, else an SSE stream of the request's
// notifications (progress) ending with the answer. Notifications for a client that does not take
// SSE are dropped: they are hints, and nothing may pile up for them.
import type { ServerResponse } from "node:http";

export class Reply {
  private streaming = false;
  private finished = false;
  private readonly takesSse: boolean;
  private readonly takesJson: boolean;

  constructor(
    readonly res: ServerResponse,
    accept: string | undefined,
  ) {
    const types = (accept ?? "*/*").toLowerCase();
    this.takesSse = types.includes("text/event-stream");
    this.takesJson = /application\/json|application\/\*|\*\/\*/.test(types);
  }

  /** Neither answered nor abandoned by the client. */
  get open(): boolean {
    return !this.finished && !this.res.destroyed;
  }

  /** A notification about the request (progress). False when it was dropped. */
  notify(message: unknown): boolean {
    if (!this.open || !this.takesSse) return false;
    this.startStream();
    this.res.write(event(message));
    return true;
  }

  /** The answer: the reply ends with it. `status` applies unless the stream has begun (then 200). */
  finish(message: unknown, status = 200): void {
    if (!this.open) return;
    this.finished = true;
    if (!this.streaming && (this.takesJson || !this.takesSse)) {
      this.res.writeHead(status, { "Content-Type": "application/json", "Cache-Control": "no-store" });
      this.res.end(JSON.stringify(message));
      return;
    }
    this.startStream();
    this.res.end(event(message));
  }

  private startStream(): void {
    if (this.streaming) return;
    this.streaming = true;
    // X-Accel-Buffering: the transport spec's advice, so that proxies pass events on at once.
    this.res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no" });
  }
}

const event = (message: unknown): string => `event: message\ndata: ${JSON.stringify(message)}\n\n`;
