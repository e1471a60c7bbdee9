// An https server on 127.0.0.1 that publishes Client ID Metadata Documents (or whatever a test
// wants at a path), with a throwaway CA, a DNS answer the broker can be given instead of the
// system's, and a count of connections so a test can show a refused fetch never connected.
import https from "node:https";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { AddressInfo, LookupFunction } from "node:net";
import { createTestCa } from "./test-ca.ts";

export type Route = (req: IncomingMessage, res: ServerResponse) => void;

/** A DNS name the document server answers for (its certificate carries it); resolves to 127.0.0.1. */
export const DOCUMENT_HOST = "apps.example.test";
/** A second name on the same server, for CIMD_TRUSTED_HOSTS. */
export const TRUSTED_HOST = "trusted.example.test";

export interface DocumentServer {
  /** https://apps.example.test:<port> */
  readonly origin: string;
  readonly port: number;
  /** The CA to trust (PEM). */
  readonly caCert: string;
  /** TLS connections accepted so far. */
  readonly connections: number;
  /** Requests received, as "METHOD path". */
  readonly requests: string[];
  /** Serves `route` at `path` (replaces what was there). */
  route(path: string, route: Route): void;
  /** Serves a JSON document at `path` with these headers. */
  json(path: string, body: unknown, headers?: Record<string, string>): void;
  /** Answers name lookups from `answers` (name → IP address); other names fail with ENOTFOUND. */
  lookup(answers?: Record<string, string>): LookupFunction;
  close(): Promise<void>;
}

/** `extraNames`: more DNS names the certificate carries (a real client's host, answered by `lookup`). */
export async function startDocumentServer(extraNames: readonly string[] = []): Promise<DocumentServer> {
  const ca = createTestCa();
  const { cert, key } = ca.issue([DOCUMENT_HOST, TRUSTED_HOST, "localhost", "127.0.0.1", ...extraNames]);
  const routes = new Map<string, Route>();
  const requests: string[] = [];
  let connections = 0;
  const server = https.createServer({ cert, key }, (req, res) => {
    const path = new URL(req.url ?? "/", "https://x").pathname;
    requests.push(`${req.method} ${path}`);
    const route = routes.get(path);
    if (route) route(req, res);
    else res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
  });
  server.on("secureConnection", () => connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    origin: `https://${DOCUMENT_HOST}:${port}`,
    port,
    caCert: ca.caCert,
    get connections() {
      return connections;
    },
    requests,
    route: (path, route) => routes.set(path, route),
    json(path, body, headers = {}) {
      routes.set(path, (_req, res) => res.writeHead(200, { "content-type": "application/json", ...headers }).end(JSON.stringify(body)));
    },
    lookup(answers = { [DOCUMENT_HOST]: "127.0.0.1", [TRUSTED_HOST]: "127.0.0.1" }): LookupFunction {
      return (hostname, options, callback) => {
        const address = answers[hostname];
        const cb = callback as unknown as (err: NodeJS.ErrnoException | null, address?: unknown, family?: number) => void;
        if (!address) return cb(Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" }));
        const family = address.includes(":") ? 6 : 4;
        if (options.all) cb(null, [{ address, family }]);
        else cb(null, address, family);
      };
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
