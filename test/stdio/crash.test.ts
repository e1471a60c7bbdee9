// Stdio children hold their user's upstream token in their environment: they must die with the
// broker however it dies. Here the real broker process is killed with SIGKILL (no code of its own
// runs) while it fronts a server that ignores SIGTERM and the end of its stdin and has started a
// process of its own. Both must go. And when even the broker's watchdog is killed with it, the
// next broker started from the same data folder finds them and stops them.
import { afterAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { startBrokerProcess, type BrokerProcess } from "../support/broker-process.ts";
import { bearerFor, fixtureEnv, running, whoami, type Whoami } from "./stdio-support.ts";
import { until } from "../support/wait.ts";

/** A server that will not go quietly, with a grandchild that will not either. */
const stubbornEnv = fixtureEnv({ MCP_SERVER_ENV: "IGNORE_SIGTERM=1 SPAWN_GRANDCHILD=1" });

const environOf = (pid: number): string[] => readFileSync(`/proc/${pid}/environ`, "latin1").split("\0");

/** The processes whose parent is `pid`. */
function childrenOf(pid: number): number[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map(Number)
    .filter((p) => {
      try {
        const stat = readFileSync(`/proc/${p}/stat`, "utf8");
        return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid;
      } catch {
        return false;
      }
    });
}

const cmdlineOf = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return "";
  }
};

describe("stdio children when the broker is killed", () => {
  const dirs: string[] = [];
  const brokers: BrokerProcess[] = [];
  /** Whatever a failing test left running is killed after the tests, so that it holds no token. */
  const pids: number[] = [];
  afterAll(async () => {
    for (const b of brokers) await b.kill();
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone, as it should be.
      }
    }
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  const start = async (dir: string): Promise<BrokerProcess> => {
    const broker = await startBrokerProcess(dir, stubbornEnv);
    brokers.push(broker);
    return broker;
  };
  /** The fixture as a user sees it through the broker, with the processes it runs as. */
  const connect = async (broker: BrokerProcess, user: string): Promise<{ client: Client; me: Whoami }> => {
    const client = new Client({ name: user, version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${broker.url}/mcp`), { requestInit: { headers: await bearerFor(broker.url, user) } }));
    const me = await whoami(client);
    pids.push(me.pid, me.grandchild!);
    // What is at stake: both processes hold the user's token.
    for (const pid of [me.pid, me.grandchild!]) expect(environOf(pid)).toContain(`UPSTREAM_TOKEN=${me.token}`);
    return { client, me };
  };

  it("kill -9 of the broker stops its child and the child's own child", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-stdio-crash-"));
    dirs.push(dir);
    const broker = await start(dir);
    const { client, me } = await connect(broker, "kim");

    await broker.kill();
    await until(() => !running(me.pid) && !running(me.grandchild!), "the child and the grandchild of the killed broker to die", 15_000);
    await client.close().catch(() => undefined);
  }, 60_000);

  it("the next broker from the same data folder stops what a broker killed with its watchdog left", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-stdio-leftover-"));
    dirs.push(dir);
    const first = await start(dir);
    const { client, me } = await connect(first, "lee");
    const brokerPid = first.child.pid!;
    const watchdog = childrenOf(brokerPid).find((pid) => cmdlineOf(pid).includes("mcp-auth-broker stdio watchdog"));
    expect(watchdog).toBeDefined();

    // Everything at once, as a kill of a whole container's processes would: stopped first, so that
    // the broker cannot notice its watchdog going and start another.
    process.kill(brokerPid, "SIGSTOP");
    process.kill(watchdog!, "SIGKILL");
    await until(() => !running(watchdog!), "the watchdog to die");
    await first.kill();
    await client.close().catch(() => undefined);
    // Nothing stopped them this time.
    expect(running(me.pid) && running(me.grandchild!)).toBe(true);

    const second = await start(dir);
    await until(() => !running(me.pid) && !running(me.grandchild!), "the next broker to stop the leftovers", 15_000);
    expect(second.output()).toMatch(/stopped stdio MCP server processes/);
  }, 60_000);
});
