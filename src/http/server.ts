// The HTTP server's lifecycle: listen, and a graceful close that stops accepting, lets in-flight
// requests finish within a deadline, then cuts what is left.
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { BrokerResponse } from "./answer-headers.ts";

export interface RunningServer {
  readonly server: http.Server;
  readonly port: number;
  /** Resolves when every in-flight request has finished or the deadline has cut it. */
  close(deadlineMs?: number): Promise<{ forced: boolean }>;
  /** Requests whose response has not ended yet (open streams included). */
  inFlight(): number;
}

/** Node's own deadlines on receiving a request. Responses (SSE streams) have none. */
export interface ServerTimeouts {
  /**
   * The request line and headers must have arrived within this time, else Node answers 408 and
   * closes. Real clients send them in one packet; the time is for slow links, not for slowloris.
   */
  readonly headersTimeoutMs: number;
  /**
   * The whole request, body included, must have arrived within this time: a backstop behind the
   * body deadlines of http/slow-requests.ts. Node applies it to receiving the request only (checked:
   * a response may stream for hours), so long-lived SSE responses are not affected.
   */
  readonly requestTimeoutMs: number;
  /** How often Node looks for connections past those deadlines (each may be exceeded by up to this). */
  readonly checkIntervalMs: number;
  /**
   * A response sent before its request's body has arrived (401 at /mcp, 404, 405…): Node reads
   * and drops the rest to reuse the connection. A body not done within this time closes it instead.
   */
  readonly unreadBodyGraceMs: number;
}

export const DEFAULT_SERVER_TIMEOUTS: ServerTimeouts = {
  headersTimeoutMs: 15_000,
  requestTimeoutMs: 300_000,
  checkIntervalMs: 5_000,
  unreadBodyGraceMs: 2_000,
};

/** Closes `socket` unless the request's body, answered already, ends within `graceMs`. */
function closeUnlessBodyEnds(req: http.IncomingMessage, socket: Socket, graceMs: number): void {
  const timer = setTimeout(() => socket.destroy(), graceMs);
  const done = () => {
    clearTimeout(timer);
    req.off("end", done);
    socket.off("close", done);
  };
  req.once("end", done);
  socket.once("close", done);
}

/**
 * Requests in flight, in all and per socket. Tracked here rather than relying on
 * closeIdleConnections(), which (Node 20) leaves some finished keep-alive sockets open, holding
 * close() for the whole keep-alive timeout.
 */
class RequestTracker {
  active = 0;
  closing = false;
  /** Called each time a request finishes once closing. */
  drained: () => void = () => {};
  readonly sockets = new Map<Socket, number>();
  /**
   * The "close" listeners, one function each for all sockets and responses (`this` is the emitter),
   * not a closure per connection and per request: an MCP event stream keeps its listeners for hours,
   * a closure and its context about 120 bytes each (bench row (s)).
   */
  private readonly socketClosed: (this: Socket) => void;
  private readonly responseClosed: (this: http.ServerResponse) => void;

  constructor(private readonly unreadBodyGraceMs: number) {
    const tracker = this;
    this.socketClosed = function (this: Socket) {
      tracker.sockets.delete(this);
    };
    this.responseClosed = function (this: http.ServerResponse) {
      tracker.finished(this);
    };
  }

  connected(socket: Socket): void {
    this.sockets.set(socket, 0);
    // `on`: "close" comes once, and a `once` wrapper would be kept for as long as the connection is open.
    socket.on("close", this.socketClosed);
  }

  request(req: http.IncomingMessage, res: http.ServerResponse): void {
    const { sockets } = this;
    this.active++;
    const socket = req.socket;
    sockets.set(socket, (sockets.get(socket) ?? 0) + 1);
    if (this.closing) res.setHeader("Connection", "close");
    res.on("close", this.responseClosed);
  }

  private finished(res: http.ServerResponse): void {
    const { sockets } = this;
    const req = res.req;
    const socket = req.socket;
    this.active--;
    if (sockets.has(socket)) sockets.set(socket, (sockets.get(socket) ?? 1) - 1);
    if (!req.complete && !socket.destroyed) closeUnlessBodyEnds(req, socket, this.unreadBodyGraceMs);
    if (this.closing) this.drained();
  }

  closeIdleSockets(): void {
    for (const [socket, inFlight] of this.sockets) if (inFlight === 0) socket.destroy();
  }
}

/** Stops accepting, cuts sockets as they fall idle, and at the deadline cuts the rest. */
function closeGracefully(server: http.Server, tracker: RequestTracker, deadlineMs: number): Promise<{ forced: boolean }> {
  tracker.closing = true;
  return new Promise((resolve) => {
    let forced = false;
    const timer = setTimeout(() => {
      forced = true;
      for (const socket of tracker.sockets.keys()) socket.destroy();
    }, deadlineMs);
    timer.unref();
    // Each time a request finishes, cut the sockets with nothing in flight (on the next tick,
    // once the response is flushed). The deadline stays armed until close() completes.
    const finish = () => setImmediate(() => tracker.closeIdleSockets());
    tracker.drained = finish;
    server.close(() => {
      clearTimeout(timer);
      resolve({ forced });
    });
    finish();
  });
}

export async function listen(handler: http.RequestListener, port: number, host: string, timeouts: Partial<ServerTimeouts> = {}): Promise<RunningServer> {
  const limits = { ...DEFAULT_SERVER_TIMEOUTS, ...timeouts };
  const server = http.createServer(
    // BrokerResponse: the headers every answer carries are written with its head (answer-headers.ts).
    {
      ServerResponse: BrokerResponse,
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    handler,
  );
  server.keepAliveTimeout = 65_000;
  const tracker = new RequestTracker(limits.unreadBodyGraceMs);
  server.on("connection", (socket: Socket) => tracker.connected(socket));
  server.on("request", (req, res) => tracker.request(req, res));
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    inFlight: () => tracker.active,
    close: (deadlineMs = 10_000) => closeGracefully(server, tracker, deadlineMs),
  };
}
