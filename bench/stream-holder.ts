// Row (s)'s stream holder: the client ends of the open MCP event streams, in a process of their own.
// In front of a broker, 5,000 connected clients are 5,000 other programs; the client whose calls
// the row times next to them is one more. Held by the load generator itself, the streams made the
// timed client's own process hold 5,000 more sockets and their parsers (in a full run, the load
// generator's CPU per call rose by a fifth with them open), and that showed as the broker's cost.
//
// Started with the MCP endpoint to hold streams at (`argv[2]`) and, through the broker, the access
// token for every session (BENCH_STREAM_TOKEN, none for a bare proxy). It prints
// `STREAM_HOLDER <port>` and answers POSTs on 127.0.0.1:<port>, one step of the row each:
//   /sessions?n=N  opens N MCP sessions (initialize + initialized), OPENING_CONCURRENCY at a time;
//   /streams       opens the standalone GET stream of every session, one connection each;
//   /tally         { ended, received }: streams that ended, bytes received on them;
//   /close         ends every session (DELETE, as a client that leaves does) and closes the streams.
import { createServer } from "node:http";
import { Pool } from "undici";
import { mcpSession } from "./mcp-calls.ts";

/** Sessions and streams opened at once: enough to keep the processes busy, not a flood. */
const OPENING_CONCURRENCY = 32;
const PROTOCOL_VERSION = "2025-06-18";

const endpoint = new URL(process.argv[2]!);
const auth: Record<string, string> = process.env.BENCH_STREAM_TOKEN ? { authorization: `Bearer ${process.env.BENCH_STREAM_TOKEN}` } : {};
delete process.env.BENCH_STREAM_TOKEN;

/** Runs `each` for 0 … n-1, at most `concurrency` at a time; resolves with the results in order. */
async function inParallel<T>(n: number, concurrency: number, each: (i: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array(n);
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const i = next++;
      results[i] = await each(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return results;
}

let sessions: string[] = [];
const tally = { ended: 0, received: 0 };
// One connection per stream (no connection limit); an SSE body never times out.
const streams = new Pool(endpoint.origin, { headersTimeout: 0, bodyTimeout: 0 });

async function openStream(session: string): Promise<void> {
  const res = await streams.request({
    method: "GET",
    path: endpoint.pathname,
    headers: { accept: "text/event-stream", "mcp-session-id": session, "mcp-protocol-version": PROTOCOL_VERSION, ...auth },
  });
  if (res.statusCode !== 200) throw new Error(`GET stream: ${res.statusCode} ${await res.body.text()}`);
  res.body.on("data", (chunk: Buffer) => {
    tally.received += chunk.length;
  });
  res.body.once("end", () => tally.ended++);
  res.body.once("error", () => tally.ended++);
}

async function close(): Promise<{ deleted: number }> {
  const pool = new Pool(endpoint.origin, { connections: OPENING_CONCURRENCY });
  try {
    await inParallel(sessions.length, OPENING_CONCURRENCY, async (i) => {
      const res = await pool.request({
        method: "DELETE",
        path: endpoint.pathname,
        headers: { "mcp-session-id": sessions[i]!, "mcp-protocol-version": PROTOCOL_VERSION, ...auth },
      });
      await res.body.dump();
    });
  } finally {
    await pool.close();
  }
  await streams.destroy();
  const deleted = sessions.length;
  sessions = [];
  return { deleted };
}

const steps: Record<string, (query: URLSearchParams) => Promise<unknown>> = {
  "/sessions": async (query) => {
    sessions = await inParallel(Number(query.get("n")), OPENING_CONCURRENCY, () => mcpSession(endpoint.href, auth));
    return { sessions: sessions.length };
  },
  "/streams": async () => {
    await inParallel(sessions.length, OPENING_CONCURRENCY, (i) => openStream(sessions[i]!));
    return { streams: sessions.length };
  },
  "/tally": async () => tally,
  "/close": close,
};

const control = createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  const step = req.method === "POST" ? steps[url.pathname] : undefined;
  if (!step) {
    res.writeHead(404).end();
    return;
  }
  step(url.searchParams).then(
    (answer) => res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer)),
    (err: unknown) => res.writeHead(500, { "content-type": "text/plain" }).end(String(err instanceof Error ? (err.stack ?? err.message) : err)),
  );
});
control.listen(0, "127.0.0.1", () => {
  const address = control.address();
  process.stdout.write(`STREAM_HOLDER ${typeof address === "object" && address ? address.port : 0}\n`);
});
process.on("SIGTERM", () => process.exit(0));
