// What every emulated service of the tests shares: an HTTP server on 127.0.0.1 at an ephemeral
// port, calls counted by name, answers held back forever (an outage that hangs) and dropped at
// close. Each emulator (GitHub, the plain OAuth 2 service) routes its own requests.
import http from "node:http";
import type { AddressInfo } from "node:net";

export abstract class EmulatorServer {
  url = "";
  /** Calls per name; each emulator says how it names them. */
  readonly calls = new Map<string, number>();
  private server!: http.Server;
  /** Answers held back (an outage that hangs): dropped at close. */
  protected readonly hanging = new Set<http.ServerResponse>();

  protected abstract route(req: http.IncomingMessage, res: http.ServerResponse): Promise<void>;

  async start(): Promise<this> {
    this.server = http.createServer((req, res) => {
      this.route(req, res).catch(() => {
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
    await new Promise<void>((r) => this.server.listen(0, "127.0.0.1", r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  /**
   * How long an idle keep-alive connection stays open (Node's default: 5 s). A broker slowed down
   * many times (under valgrind: bench/instructions.ts) may reuse a connection just as the emulator
   * closes it; a longer wait keeps that race out of a measurement.
   */
  keepIdleConnections(ms: number): this {
    this.server.keepAliveTimeout = ms;
    return this;
  }

  async close(): Promise<void> {
    for (const res of this.hanging) res.destroy();
    this.server.closeAllConnections();
    await new Promise((r) => this.server.close(r));
  }

  protected count1(key: string): void {
    this.calls.set(key, (this.calls.get(key) ?? 0) + 1);
  }
}
