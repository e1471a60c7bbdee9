// The HTTP server's lifecycle: listen, and a graceful close that stops accepting, lets in-flight
// requests finish within a deadline, then cuts what is left.
import http from "node:http";
import type { AddressInfo } from "node:net";

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
  server.on("request", (req, res) => {
    active++;
    if (closing) res.setHeader("Connection", "close");
    res.on("close", () => {
      active--;
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
          server.closeAllConnections();
        }, deadlineMs);
        timer.unref();
        const finish = () => {
          if (active === 0) {
            clearTimeout(timer);
            server.closeIdleConnections();
          }
        };
        drained = finish;
        server.close(() => {
          clearTimeout(timer);
          resolve({ forced });
        });
        server.closeIdleConnections();
        finish();
      });
    },
  };
}
