// Starts a real broker in-process on 127.0.0.1 with an ephemeral port and a fresh SQLite file in
// a temp folder. Tests talk to it over real HTTP.
import { poolConnectionsClosed } from "./pool-connections.ts";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes, randomInt } from "node:crypto";
import { loadConfig, missingMcpServer, type Config } from "../../src/config/load.ts";
import { startDemoMcpServer, type DemoMcpServer } from "../../src/demo/mcp-server.ts";
import { createBroker, type Broker, type BrokerOptions } from "../../src/broker.ts";
import { createLogger } from "../../src/logger.ts";
import { createServer } from "node:net";
import type { DestinationStream } from "pino";
import { copyMigratedSqlite } from "./template-db.ts";

export interface TestBroker {
  readonly broker: Broker;
  /** PUBLIC_URL of the broker, e.g. http://127.0.0.1:41234 */
  readonly url: string;
  /** Where this instance listens (differs from url when instances share one PUBLIC_URL). */
  readonly origin: string;
  readonly dir: string;
  /** Stops the broker and the demo MCP server started for it; `keepDir` leaves its database for another instance. */
  stop(options?: { keepDir?: boolean }): Promise<void>;
}

/** Whether nothing listens on `port` of 127.0.0.1 now. */
function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/**
 * A port for a process that will listen on it later. Taken below Linux's ephemeral range
 * (32768–60999), from which every outgoing connection and every listen(0) draws its port: under a
 * loaded suite one of those can take a port listen(0) has just given back, and a process started
 * later on it fails to listen (seen as `npm start` exiting 1 in a full run). Here only another
 * caller of this function can collide.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 20000 + randomInt(12768);
    if (await canListen(port)) return port;
  }
  throw new Error("no free port between 20000 and 32767 on 127.0.0.1 after 100 tries");
}

/**
 * `env` overrides the defaults (demo provider, fresh SQLite, random SECRET_KEY). PUBLIC_URL must
 * know the port, so a free port is chosen first; another process may take it before the broker
 * listens, and then (unless `env` fixed the port) the broker is built again on another one.
 * `configure` changes the configuration loaded from `env` before the broker is built (e.g. a
 * server catalogue the environment cannot describe).
 */
export async function startBroker(
  env: Record<string, string> = {},
  options: Omit<BrokerOptions, "cwd" | "logger"> & { readonly logDestination?: DestinationStream; readonly configure?: (config: Config) => Config } = {},
): Promise<TestBroker> {
  const dir = mkdtempSync(path.join(tmpdir(), "mab-test-"));
  // A migrated copy: the broker's own migration step then finds nothing to do.
  if (env.DATABASE_URL === undefined) await copyMigratedSqlite(path.join(dir, "broker.db"));
  const secretKey = randomBytes(32).toString("base64");
  const { logDestination, configure = (config: Config) => config, ...brokerOptions } = options;
  // Outside demo mode the broker needs an MCP server to protect: the demo one, unless the test chose.
  let mcp: DemoMcpServer | undefined;
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const read = (extra: Record<string, string>) =>
      configure(
        loadConfig(
          {
            PORT: String(port),
            HOST: "127.0.0.1",
            PUBLIC_URL: `http://127.0.0.1:${port}`,
            DATABASE_URL: `file:${path.join(dir, "broker.db")}`,
            SECRET_KEY: secretKey,
            LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? "silent",
            ...env,
            ...extra,
          },
          dir,
        ),
      );
    let config = read(mcp ? { MCP_SERVER_URL: mcp.url } : {});
    if (missingMcpServer(config, brokerOptions.mcpHandler !== undefined)) {
      mcp = await startDemoMcpServer();
      config = read({ MCP_SERVER_URL: mcp.url });
    }
    // No start-up probes unless asked: they would add calls to the emulators that tests count.
    const broker = await createBroker(config, {
      ...brokerOptions,
      startProbes: brokerOptions.startProbes ?? false,
      cwd: dir,
      logger: createLogger(config.logLevel, logDestination),
    });
    try {
      await broker.listen();
    } catch (err) {
      await broker.stop(0);
      if ((err as NodeJS.ErrnoException).code === "EADDRINUSE" && env.PORT === undefined && attempt < 5) continue;
      throw err;
    }
    return {
      broker,
      url: config.publicUrl,
      origin: `http://127.0.0.1:${config.port}`,
      dir,
      async stop({ keepDir = false } = {}) {
        await broker.stop(2000);
        await mcp?.close();
        // The server destroyed its keep-alive sockets; this process's fetch pool learns it only when
        // it reads their end. A broker restarted on the same port at once would otherwise get the
        // next request on a dead socket.
        await poolConnectionsClosed(config.port);
        if (!keepDir) rmSync(dir, { recursive: true, force: true });
      },
    };
  }
}

/** A broker whose PUBLIC_URL has a path (`/broker`), as behind a reverse proxy that mounts it there. */
export async function startBrokerUnderPath(env: Record<string, string> = {}): Promise<{ broker: TestBroker; origin: string; issuer: string }> {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const issuer = `${origin}/broker`;
  const broker = await startBroker({ PORT: String(port), PUBLIC_URL: issuer, ...env });
  return { broker, origin, issuer };
}

export interface TwoInstances {
  readonly first: TestBroker;
  /** Listens on a port of its own, with the first's PUBLIC_URL. */
  readonly second: TestBroker;
  /** The one MCP server behind both. */
  readonly mcpServer: DemoMcpServer;
  /** Stops both instances and the MCP server; the database is the caller's. */
  stop(): Promise<void>;
}

/**
 * Two broker instances on the database at `databaseUrl`, as behind a load balancer: one
 * PUBLIC_URL, one SECRET_KEY, one demo MCP server behind both; `env` and `options` for both.
 */
export async function startTwoInstances(
  databaseUrl: string,
  env: Record<string, string> = {},
  options: Parameters<typeof startBroker>[1] = {},
): Promise<TwoInstances> {
  const mcpServer = await startDemoMcpServer();
  const shared = { ...env, DATABASE_URL: databaseUrl, SECRET_KEY: randomBytes(32).toString("base64"), MCP_SERVER_URL: mcpServer.url };
  const first = await startBroker(shared, options);
  const second = await startBroker({ ...shared, PUBLIC_URL: first.url }, options);
  return {
    first,
    second,
    mcpServer,
    async stop() {
      await Promise.all([first.stop(), second.stop()]);
      await mcpServer.close();
    },
  };
}
