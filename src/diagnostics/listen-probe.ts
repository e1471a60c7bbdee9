// Can the broker listen on HOST:PORT? Asked before the database is migrated (a port in use is
// then said at once, not after seconds of migrations), and by `check`. The listening socket is
// closed again at once: the broker binds it for real once everything else is ready.
import { createServer } from "node:net";

/** What a failure to listen means, with the setting to change; undefined for an unknown cause. */
export function describeListenFailure(code: string | undefined, host: string, port: number): string | undefined {
  if (code === "EADDRINUSE") return `port ${port} on ${host} is already in use; set PORT to a free port`;
  if (code === "EACCES") return `not allowed to listen on ${host}:${port}; choose a PORT above 1024`;
  if (code === "EADDRNOTAVAIL") return `HOST=${host} is not an address of this machine`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN") return `HOST=${host} does not resolve to an address of this machine`;
  return undefined;
}

/** The error code of listening on host:port now, or undefined when it works (port 0 always does). */
export function listenFailure(host: string, port: number): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    server.listen({ host, port, exclusive: true }, () => server.close(() => resolve(undefined)));
  });
}
