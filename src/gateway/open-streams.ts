// The MCP event streams (SSE) the proxy is relaying now, so that a shutdown can say how many it
// waits for and end them as the protocol allows instead of cutting them: a stream with requests
// still unanswered gets a JSON-RPC error for each (the client learns the request failed and may
// retry elsewhere), a stream with nothing pending (the GET stream of server messages) simply ends,
// which clients answer by reconnecting. Nothing here runs per request beyond a Set insertion: the
// request body is read for its ids only when a stream is ended.
import type { ServerResponse } from "node:http";
import { Readable } from "node:stream";

type RequestId = string | number;

/** Where a relayed stream's events come from: undici's body stream, or the proxy's direct relay (direct-relay.ts). */
export interface StreamSource {
  /** Takes no more events for now. */
  pause(): unknown;
  /** Cuts the request to the MCP server. */
  destroy(): unknown;
}

/** A stream being relayed, as opened() gave it; closed() takes it back. */
export interface OpenStream {
  readonly res: ServerResponse;
  readonly source: StreamSource;
  /** The request's JSON body (POST), whose requests the stream answers. */
  readonly body: Buffer | null;
}

/** The ids of the JSON-RPC requests in a body (one message or a batch); notifications have none. */
function requestIds(body: Buffer | null): RequestId[] {
  if (!body || body.length === 0) return [];
  try {
    const parsed = JSON.parse(body.toString("utf8")) as unknown;
    return [parsed].flat().flatMap((m) => {
      const message = m as { id?: unknown; method?: unknown } | null;
      return message && typeof message.method === "string" && (typeof message.id === "string" || typeof message.id === "number") ? [message.id] : [];
    });
  } catch {
    return [];
  }
}

export const SHUTDOWN_MESSAGE = "The broker is shutting down; please retry.";

export class OpenStreams {
  private readonly streams = new Set<OpenStream>();

  /**
   * A stream the proxy has started relaying; give it to closed() when it has ended. (Not a closure
   * to call: an open GET stream would keep one, and its context, for hours; bench row (s).)
   */
  opened(res: ServerResponse, source: StreamSource, body: Buffer | null): OpenStream {
    const stream: OpenStream = { res, source, body };
    this.streams.add(stream);
    return stream;
  }

  /** A stream opened() gave has ended. */
  closed(stream: OpenStream): void {
    this.streams.delete(stream);
  }

  get size(): number {
    return this.streams.size;
  }

  /** How many streams answer requests (POST) and how many only carry server messages (GET). */
  count(): { readonly answering: number; readonly listening: number } {
    let answering = 0;
    for (const stream of this.streams) if (stream.body) answering++;
    return { answering, listening: this.streams.size - answering };
  }

  /** Ends the streams that answer no request: they would otherwise stay open until the deadline. */
  endListening(): void {
    for (const stream of this.streams) if (!stream.body) this.end(stream);
  }

  /** Ends every stream: a JSON-RPC error for each request it still answers, then the end of the stream. */
  endAll(message = SHUTDOWN_MESSAGE): void {
    for (const stream of this.streams) this.end(stream, message);
  }

  private end(stream: OpenStream, message = SHUTDOWN_MESSAGE): void {
    this.streams.delete(stream);
    const { res, source } = stream;
    if (res.writableEnded || res.destroyed) return;
    // The MCP server's events stop here (the relay takes nothing for an ended response, pump.ts);
    // the stream is closed by the broker, not cut.
    source.pause();
    const events = requestIds(stream.body).map((id) => `event: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", id, error: { code: -32603, message } })}\n\n`);
    res.end(events.join(""), () => {
      // What the MCP server still sends goes nowhere; undici's body errors when destroyed.
      if (source instanceof Readable) source.on("error", () => {});
      source.destroy();
    });
  }
}
