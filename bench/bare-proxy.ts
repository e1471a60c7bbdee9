// The benchmark's floor for the cached /mcp path: a bare Koa app that forwards /mcp to the MCP
// server through an undici pool, streaming both ways, with no authentication, logging or
// metrics. What the broker costs above it is the broker's own work. With `plain` as the second
// argument, the same proxy without Koa (node:http alone): how much of the floor is Koa's.
//
// Both relay the answer as the broker does: the status and headers written at once, the body by
// the broker's own pump (gateway/pump.ts). Not Koa's stream body nor stream.pipeline: they cost
// more than the relay the broker uses (measured apart, node:http + undici: 30.6 KB allocated per
// request with stream.pipeline, 19.3 KB with a plain data/drain relay), so a floor built on them
// stood higher than the floor the broker stands on, and the broker's own share looked smaller.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import Koa from "koa";
import { Pool } from "undici";
import { pump } from "../src/gateway/pump.ts";

const target = new URL(process.argv[2]!);
const plain = process.argv[3] === "plain";
const pool = new Pool(target.origin, { headersTimeout: 0, bodyTimeout: 0 });
const FORWARDED = ["content-type", "accept", "mcp-session-id", "mcp-protocol-version", "mcp-method", "mcp-name"];
const RETURNED = ["content-type", "mcp-session-id"];

function forward(req: IncomingMessage) {
  const headers: Record<string, string> = {};
  for (const name of FORWARDED) {
    const value = req.headers[name];
    if (typeof value === "string") headers[name] = value;
  }
  return pool.request({ method: req.method as "GET" | "POST" | "DELETE", path: target.pathname, headers, body: req });
}

function returned(answer: Awaited<ReturnType<typeof forward>>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of RETURNED) {
    const value = answer.headers[name];
    if (typeof value === "string") headers[name] = value;
  }
  return headers;
}

function relay(answer: Awaited<ReturnType<typeof forward>>, req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(answer.statusCode, returned(answer));
  // A GET event stream may stay silent for hours: its headers go now, as the broker's do.
  if (req.method === "GET") res.flushHeaders();
  pump(answer.body, res, () => {});
}

function koaServer(): Server {
  const app = new Koa();
  // Clients that close their event streams are not errors worth a stack trace each (bench row (s)).
  app.silent = true;
  app.use(async (ctx) => {
    const answer = await forward(ctx.req);
    ctx.respond = false;
    relay(answer, ctx.req, ctx.res);
  });
  return createServer(app.callback());
}

function plainServer(): Server {
  return createServer((req, res) => {
    forward(req)
      .then((answer) => relay(answer, req, res))
      .catch(() => res.destroy());
  });
}

const server = plain ? plainServer() : koaServer();
server.listen(0, "127.0.0.1", () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`BARE_PROXY_URL http://127.0.0.1:${port}/mcp\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
