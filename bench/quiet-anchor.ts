// Row (a'): row (a)'s one-client blocks again, against the quiet MCP server (bench/serve-mcp-quiet.ts)
// instead of the SDK's: the broker, and the two bare proxies as the floor, each in front of it.
// Against the SDK's server, whose own scavenges land on about one call in a hundred, the added p99
// is a draw between those pauses; here the direct calls' tail is the machine's alone.
import type { ChildProcess } from "node:child_process";
import { median } from "./load.ts";
import {
  blockFigures,
  brokerScavenges,
  mcpSession,
  ONE_CLIENT_BLOCKS,
  oneClientBlocks,
  type OneClientBlock,
  SEQUENTIAL_REQUESTS,
  warmOneClient,
} from "./mcp-calls.ts";
import { startBareProxy, startProcess, stop } from "./processes.ts";
import { obtainTokens } from "../test/support/oauth-flow.ts";

type StartBroker = (recheck: string, db: string, extra?: Record<string, string>) => Promise<{ child: ChildProcess; url: string }>;

interface Proxy {
  readonly url: string;
  readonly session: string;
  readonly headers: Record<string, string>;
}

async function bareBlocks(serverUrl: string, direct: Proxy, kind: "koa" | "plain"): Promise<OneClientBlock[]> {
  const { child, url } = await startBareProxy(serverUrl, kind);
  try {
    const proxy = { url, session: await mcpSession(url, {}), headers: {} };
    await warmOneClient(proxy.url, proxy.headers, proxy.session);
    return await oneClientBlocks(direct, proxy);
  } finally {
    await stop(child);
  }
}

export async function quietAnchorRows(startBroker: StartBroker): Promise<Array<[string, string]>> {
  const { child: server, match } = await startProcess(["bench/serve-mcp-quiet.ts"], {}, /MCP_URL (\S+)/);
  try {
    const serverUrl = match[1]!;
    const direct = { url: serverUrl, session: await mcpSession(serverUrl, {}), headers: {} };
    const koa = await bareBlocks(serverUrl, direct, "koa");
    const plain = await bareBlocks(serverUrl, direct, "plain");
    const broker = await startBroker("30", "broker-quiet.db", { MCP_SERVER_URL: serverUrl });
    try {
      const { tokens } = await obtainTokens(broker.url, { user: "bench" });
      const headers = { authorization: `Bearer ${tokens.access_token}` };
      const url = `${broker.url}/mcp`;
      const proxy = { url, session: await mcpSession(url, headers), headers };
      await warmOneClient(proxy.url, proxy.headers, proxy.session);
      const scavenges = brokerScavenges(broker.url);
      const blocks = await oneClientBlocks(direct, proxy, scavenges);
      return [
        [
          `(a') one client alone, quiet MCP server (${ONE_CLIENT_BLOCKS} blocks of ${SEQUENTIAL_REQUESTS})`,
          `${blockFigures(blocks)}; target p99 < 0.5 ms every block: ${blocks.every((b) => b.addedP99Ms < 0.5) ? "met" : "not met"}`,
        ],
        [
          "      direct calls' own p50 / p99 per block",
          `${median(blocks.map((b) => b.directP50Ms)).toFixed(2)} ms / ${blocks.map((b) => b.directP99Ms.toFixed(2)).join(", ")} ms`,
        ],
        ["      the broker's scavenges in those blocks", scavenges.line()],
        ["      the same through the bare Koa + undici proxy", blockFigures(koa)],
        ["      the same through node:http + undici", blockFigures(plain)],
      ];
    } finally {
      await stop(broker.child);
    }
  } finally {
    await stop(server);
  }
}
