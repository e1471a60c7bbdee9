// HTTP/1.1 over a raw node:net socket, so a test controls exactly which bytes leave and when: a
// body trickled a byte at a time, a chunked body too large or malformed. The response is parsed
// just enough to read status, headers and a Content-Length or chunked body.
import net from "node:net";

export interface RawResponse {
  readonly status: number;
  /** Lower-cased header names. */
  readonly headers: Record<string, string>;
  readonly body: string;
}

export interface RawExchange {
  readonly socket: net.Socket;
  /** The first response on the connection; rejects if the connection ends or resets before it is whole. */
  readonly response: Promise<RawResponse>;
  /** Settles when the connection is gone; `reset` tells an ECONNRESET from an orderly close. */
  readonly closed: Promise<{ reset: boolean }>;
  /** Writes unless the socket is gone (then the bytes are dropped, as a client's would be). */
  write(data: string | Buffer): void;
  /** Writes `byte` every `everyMs` until the response arrives or the connection is gone. */
  trickle(everyMs: number, byte?: string): void;
  destroy(): void;
}

/**
 * `head` is the request line and headers without the blank line; `first` follows the blank line at
 * once. `{ raw }` sends exactly those bytes instead (a head that never ends).
 */
export function rawRequest(origin: string, head: string | { raw: string }, first: string | Buffer = ""): RawExchange {
  const { hostname, port } = new URL(origin);
  const socket = net.connect(Number(port), hostname);
  socket.setNoDelay(true);
  let received = Buffer.alloc(0);
  let parsed: RawResponse | undefined;
  let trickleTimer: NodeJS.Timeout | undefined;
  let resolveResponse!: (r: RawResponse) => void;
  let rejectResponse!: (e: Error) => void;
  const response = new Promise<RawResponse>((resolve, reject) => {
    resolveResponse = resolve;
    rejectResponse = reject;
  });
  response.catch(() => {}); // observed by the test when it awaits; never an unhandled rejection
  let resetSeen = false;
  const closed = new Promise<{ reset: boolean }>((resolve) => {
    socket.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code === "ECONNRESET" || err.code === "EPIPE") resetSeen = true;
    });
    socket.on("close", () => {
      clearInterval(trickleTimer);
      tryParse(true);
      if (!parsed)
        rejectResponse(
          new Error(
            `the connection ${resetSeen ? "was reset" : "closed"} before a whole response (got ${JSON.stringify(received.toString("latin1").slice(0, 200))})`,
          ),
        );
      resolve({ reset: resetSeen });
    });
  });

  function tryParse(atClose: boolean): void {
    if (parsed) return;
    const end = received.indexOf("\r\n\r\n");
    if (end < 0) return;
    const lines = received.subarray(0, end).toString("latin1").split("\r\n");
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(lines[0]!)?.[1] ?? NaN);
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(":");
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const rest = received.subarray(end + 4);
    let body: Buffer | undefined;
    if (headers["content-length"] !== undefined) {
      const length = Number(headers["content-length"]);
      if (rest.length >= length) body = rest.subarray(0, length);
    } else if (/chunked/i.test(headers["transfer-encoding"] ?? "")) {
      const parts: Buffer[] = [];
      let at = 0;
      for (;;) {
        const lineEnd = rest.indexOf("\r\n", at);
        if (lineEnd < 0) break;
        const size = parseInt(rest.subarray(at, lineEnd).toString("latin1"), 16);
        if (size === 0) {
          body = Buffer.concat(parts);
          break;
        }
        if (rest.length < lineEnd + 2 + size + 2) break;
        parts.push(rest.subarray(lineEnd + 2, lineEnd + 2 + size));
        at = lineEnd + 2 + size + 2;
      }
    } else if (atClose) {
      body = rest;
    }
    if (body === undefined) return;
    parsed = { status, headers, body: body.toString("utf8") };
    clearInterval(trickleTimer);
    resolveResponse(parsed);
  }

  socket.on("data", (d: Buffer) => {
    received = Buffer.concat([received, d]);
    tryParse(false);
  });
  const write = (data: string | Buffer) => {
    if (!socket.destroyed && socket.writable) socket.write(data, () => {});
  };
  write(typeof head === "string" ? `${head}\r\n\r\n` : head.raw);
  if (first.length > 0) write(first);
  return {
    socket,
    response,
    closed,
    write,
    trickle(everyMs, byte = "a") {
      trickleTimer = setInterval(() => write(byte), everyMs);
    },
    destroy: () => {
      clearInterval(trickleTimer);
      socket.destroy();
    },
  };
}

/** Request head lines joined for rawRequest. */
export function head(method: string, path: string, headers: Record<string, string>): string {
  return [`${method} ${path} HTTP/1.1`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)].join("\r\n");
}
