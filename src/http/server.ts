// The HTTP server's lifecycle: listen, and a graceful close that stops accepting, lets in-flight
// requests finish within a deadline, then cuts what is left.
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";

export interface RunningServer {
  readonly server: http.Server;
  readonly port: number;
  /** Resolves when every in-flight request has finished or the deadline has cut it. */
  close(deadlineMs?: number): Promise<{ forced: boolean }>;
}

export async function listen(handler: http.RequestListener, port: number, host: string): Promise<RunningServer> {
  const server = http.createServer(handler);
  // Long-lived SSE streams must not be cut by Node's default request timeout.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  server.keepAliveTimeout = 65_000;
  let active = 0;
  let closing = false;
  // Requests in flight per socket. Tracked here rather than relying on closeIdleConnections(),
  // which (Node 20) leaves some finished keep-alive sockets open, holding close() for the
  // whole keep-alive timeout.
  const sockets = new Map<Socket, number>();
  server.on("connection", (socket: Socket) => {
    sockets.set(socket, 0);
    socket.once("close", () => sockets.delete(socket));
  });
  const closeIdleSockets = () => {
    for (const [socket, inFlight] of sockets) if (inFlight === 0) socket.destroy();
  };
  server.on("request", (req, res) => {
    active++;
    const socket = req.socket;
    sockets.set(socket, (sockets.get(socket) ?? 0) + 1);
    if (closing) res.setHeader("Connection", "close");
    res.on("close", () => {
      active--;
      if (sockets.has(socket)) sockets.set(socket, (sockets.get(socket) ?? 1) - 1);
      if (closing) drained();
    });
  });
  let drained: () => void = () => {};
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const actualPort = (server.address() as AddressInfo).port;

  return {
    server,
    port: actualPort,
    close(deadlineMs = 10_000) {
      closing = true;
      return new Promise((resolve) => {
        let forced = false;
        const timer = setTimeout(() => {
          forced = true;
          for (const socket of sockets.keys()) socket.destroy();
        }, deadlineMs);
        timer.unref();
        // Each time a request finishes, cut the sockets with nothing in flight (on the next tick,
        // once the response is flushed). The deadline stays armed until close() completes.
        const finish = () => setImmediate(closeIdleSockets);
        drained = finish;
        server.close(() => {
          clearTimeout(timer);
          resolve({ forced });
        });
        finish();
      });
    },
  };
}
