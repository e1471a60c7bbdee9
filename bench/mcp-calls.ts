// The MCP traffic every /mcp row of the bench sends: a session opened as a client opens one, then
// tools/call requests within it from any number of concurrent clients; or MCP 2026-07-28 tools/call
// requests, each on its own (no session), as the SDK v2 client sends them.
import { runLoad } from "./load.ts";
import { INITIALIZE_MESSAGE } from "../test/support/mcp-probe.ts";

export const CONCURRENCY = 50;
export const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 5000);
/** One client sending back to back: latency without queueing behind other clients on busy cores. */
export const SEQUENTIAL_REQUESTS = 1000;

/** Opens an MCP session (initialize + initialized) and returns its id. */
export async function mcpSession(url: string, headers: Record<string, string>): Promise<string> {
  const base = { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers };
  const res = await fetch(url, {
    method: "POST",
    headers: base,
    body: JSON.stringify(INITIALIZE_MESSAGE),
  });
  const id = res.headers.get("mcp-session-id");
  await res.text();
  if (!id) throw new Error(`no MCP session from ${url}: ${res.status}`);
  const note = await fetch(url, {
    method: "POST",
    headers: { ...base, "mcp-session-id": id, "mcp-protocol-version": "2025-06-18" },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await note.text();
  return id;
}

/** tools/call echo requests: REQUESTS of them at `concurrency` clients, or `requests` when given; `rate` paces them (per second). */
export function toolCalls(url: string, headers: Record<string, string>, session: string, concurrency = CONCURRENCY, requests?: number, rate?: number) {
  return runLoad({
    url,
    concurrency,
    ...(rate !== undefined ? { rate } : {}),
    requests: requests ?? (concurrency === 1 ? SEQUENTIAL_REQUESTS : REQUESTS),
    headers: () => ({
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-session-id": session,
      "mcp-protocol-version": "2025-06-18",
      ...headers,
    }),
    body: (w, i) => JSON.stringify({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name: "echo", arguments: { message: `w${w}` } } }),
  });
}

/** The per-request envelope of MCP 2026-07-28, as the SDK v2 client attaches it. */
const MODERN_META = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientInfo": { name: "bench", version: "1" },
  "io.modelcontextprotocol/clientCapabilities": {},
};

/** 2026-07-28 stateless tools/call echo requests, with the request metadata headers. */
export function statelessToolCalls(url: string, headers: Record<string, string>, concurrency = CONCURRENCY, requests?: number, rate?: number) {
  return runLoad({
    url,
    concurrency,
    ...(rate !== undefined ? { rate } : {}),
    requests: requests ?? (concurrency === 1 ? SEQUENTIAL_REQUESTS : REQUESTS),
    headers: () => ({
      "content-type": "application/json",
      accept: "application/json, text/event-stream",
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
      "mcp-name": "echo",
      ...headers,
    }),
    body: (w, i) =>
      JSON.stringify({ jsonrpc: "2.0", id: i + 1, method: "tools/call", params: { name: "echo", arguments: { message: `w${w}` }, _meta: MODERN_META } }),
  });
}

/** Blocks of SEQUENTIAL_REQUESTS calls by one client, alternating direct and through the broker. */
export const ONE_CLIENT_BLOCKS = 5;

export interface OneClientBlock {
  readonly addedP50Ms: number;
  readonly addedP99Ms: number;
  readonly directP50Ms: number;
}

/**
 * One client's latency through the broker against the same calls direct, in ONE_CLIENT_BLOCKS
 * pairs of blocks: each block's added p50 and p99 (the broker's block minus the direct block just
 * before it), so a pause that hits one block shows as that block's figure, not a blur over all.
 */
export async function oneClientBlocks(
  direct: { url: string; session: string },
  through: { url: string; session: string; headers: Record<string, string> },
): Promise<OneClientBlock[]> {
  const blocks: OneClientBlock[] = [];
  for (let b = 0; b < ONE_CLIENT_BLOCKS; b++) {
    const d = await toolCalls(direct.url, {}, direct.session, 1);
    const t = await toolCalls(through.url, through.headers, through.session, 1);
    blocks.push({ addedP50Ms: t.p50Ms - d.p50Ms, addedP99Ms: t.p99Ms - d.p99Ms, directP50Ms: d.p50Ms });
  }
  return blocks;
}
