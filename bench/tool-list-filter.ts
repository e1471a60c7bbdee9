// Row (p): what permissions per tool cost the broker, in-process (no network, no MCP server): a
// tools/list answer of 200 tools filtered as JSON and as SSE (the answer in 16 KiB chunks, as a
// socket delivers it), SSE events that answer nothing the filter looks at, and the request side
// (strict parse, callsIn, decideCalls) of one tools/call. A benchmark: it prints, asserts nothing.
// Alone: `npx tsx bench/tool-list-filter.ts`.
import { through } from "../test/support/stream-through.ts";
import { pathToFileURL } from "node:url";
import type { AccessRules } from "../src/config/catalogue.ts";
import { type ToolCaller, ToolPolicy } from "../src/grants/tool-policy.ts";
import { callsIn, decideCalls, parseRequestBody } from "../src/gateway/tool-calls.ts";
import { ToolListFilter } from "../src/gateway/tool-list-filter.ts";

const TOOLS = 200;
const CHUNK = 16 * 1024;

const NOBODY: AccessRules = { users: [], emailDomains: [], githubOrgs: [], groups: [] };
const policy = new ToolPolicy([
  { match: "delete_*", allow: { ...NOBODY, groups: ["platform"] } },
  { match: "admin_*", deny: true },
  { match: "write_*", requireScope: "docs:write" },
  { match: "*", requireScope: "docs:read" },
]);
const caller: ToolCaller = { facts: { subject: "oidc:bob", login: "bob", groups: ["sales"] }, scopes: ["mcp", "docs:read"] };

/** A tool as real servers describe theirs: a paragraph of description, a schema of a few properties. */
function tool(i: number) {
  const verb = ["get", "list", "search", "write", "delete", "admin", "create", "update"][i % 8];
  return {
    name: `${verb}_item_${i}`,
    description: `Does ${verb} on item ${i}. `.repeat(8),
    inputSchema: {
      type: "object",
      properties: {
        id: { type: "string", description: "The item's identifier" },
        limit: { type: "integer", minimum: 1, maximum: 100, description: "How many to return" },
        filter: { type: "object", properties: { owner: { type: "string" }, state: { type: "string", enum: ["open", "closed", "all"] } } },
      },
      required: ["id"],
    },
    annotations: { readOnlyHint: verb === "get" || verb === "list" || verb === "search" },
  };
}

function chunked(bytes: Buffer): Buffer[] {
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += CHUNK) chunks.push(bytes.subarray(at, at + CHUNK));
  return chunks;
}

/**
 * Milliseconds per call of `run`: the best of 7 rounds of `perRound` calls, after a warm-up. The
 * best round, not the mean: on shared cores another process's burst only ever adds time.
 */
async function timed(run: () => Promise<unknown> | unknown, perRound: number): Promise<number> {
  for (let i = 0; i < Math.min(perRound, 50); i++) await run();
  let best = Number.POSITIVE_INFINITY;
  for (let round = 0; round < 7; round++) {
    const started = performance.now();
    for (let i = 0; i < perRound; i++) await run();
    best = Math.min(best, (performance.now() - started) / perRound);
  }
  return best;
}

export async function toolListFilterRows(): Promise<Array<[string, string]>> {
  const answer = { jsonrpc: "2.0", id: 1, result: { tools: Array.from({ length: TOOLS }, (_, i) => tool(i)), nextCursor: "next" } };
  const json = Buffer.from(JSON.stringify(answer));
  const sse = Buffer.from(`: ping\n\nid: e1\nevent: message\ndata: ${json}\n\n`);
  const visible = (name: string) => policy.visible(name, caller);
  const answers = { toolLists: [1], requestIds: [1], batch: false };
  const filter = (contentType: string) => new ToolListFilter({ contentType, answers, visible });
  const kept = (JSON.parse(String(await through(filter("application/json"), [json]))) as typeof answer).result.tools.length;

  const jsonMs = await timed(() => through(filter("application/json"), chunked(json)), 50);
  const sseMs = await timed(() => through(filter("text/event-stream"), chunked(sse)), 50);
  // The bare cost of reading the same answer: one JSON.parse and JSON.stringify, no stream.
  const parseMs = await timed(() => JSON.stringify(JSON.parse(json.toString())), 50);

  // Events that answer nothing the filter looks at: 1,000 progress notifications in one stream.
  const progress = Buffer.from(
    Array.from(
      { length: 1000 },
      (_, i) =>
        `id: p${i}\nevent: message\ndata: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, progress: i } })}\n\n`,
    ).join(""),
  );
  const passMs = await timed(() => through(filter("text/event-stream"), chunked(progress)), 10);

  const call = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "search_item_2", arguments: { id: "x" } } }));
  const decideMs = await timed(() => {
    const parsed = parseRequestBody(call);
    if ("value" in parsed) decideCalls(policy, caller, callsIn(parsed.value));
  }, 10_000);

  const kb = (n: number) => `${(n / 1024).toFixed(0)} KiB`;
  return [
    [`(p) tools/list of ${TOOLS} tools (${kb(json.length)}), ${TOOLS - kept} hidden: JSON filter`, `${jsonMs.toFixed(2)} ms per answer (best of 7 rounds)`],
    [`    the same answer as an SSE event, in ${kb(CHUNK)} chunks`, `${sseMs.toFixed(2)} ms per answer (best of 7 rounds)`],
    ["    for scale: JSON.parse + JSON.stringify of that answer alone", `${parseMs.toFixed(2)} ms`],
    ["    SSE events the filter passes untouched (progress notifications)", `${passMs.toFixed(1)} µs per event` /* ms per 1,000 events */],
    ["    request side of one tools/call (parse, callsIn, decideCalls)", `${(decideMs * 1000).toFixed(1)} µs`],
  ];
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const rows = await toolListFilterRows();
  const width = Math.max(...rows.map(([label]) => label.length));
  for (const [label, value] of rows) process.stdout.write(`${label.padEnd(width)}  ${value}\n`);
}
