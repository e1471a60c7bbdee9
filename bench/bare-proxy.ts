// The benchmark's floor for the cached /mcp path: a bare Koa app that forwards /mcp to the MCP
// server through an undici pool, streaming both ways, with no authentication, logging or
// metrics. What the broker costs above it is the broker's own work.
import Koa from "koa";
import { Pool } from "undici";

const target = new URL(process.argv[2]!);
const pool = new Pool(target.origin, { headersTimeout: 0, bodyTimeout: 0 });
const FORWARDED = ["content-type", "accept", "mcp-session-id", "mcp-protocol-version"];
const RETURNED = ["content-type", "mcp-session-id"];

const app = new Koa();
app.use(async (ctx) => {
  const headers: Record<string, string> = {};
  for (const name of FORWARDED) if (ctx.get(name)) headers[name] = ctx.get(name);
  const answer = await pool.request({ method: ctx.method as "GET" | "POST" | "DELETE", path: target.pathname, headers, body: ctx.req });
  ctx.status = answer.statusCode;
  for (const name of RETURNED) {
    const value = answer.headers[name];
    if (typeof value === "string") ctx.set(name, value);
  }
  ctx.body = answer.body;
});
const server = app.listen(0, "127.0.0.1", () => {
  const { port } = server.address() as { port: number };
  process.stdout.write(`BARE_PROXY_URL http://127.0.0.1:${port}/mcp\n`);
});
process.on("SIGTERM", () => server.close(() => process.exit(0)));
