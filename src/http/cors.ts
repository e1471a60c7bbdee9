// CORS for the endpoints browser-based MCP clients (the MCP Inspector) call directly: metadata,
// registration, token, revocation and the MCP endpoint. No credentials: tokens travel in headers.
import type Koa from "koa";

export function cors(options: { methods: string }): Koa.Middleware {
  return async (ctx, next) => {
    ctx.set("Access-Control-Allow-Origin", "*");
    ctx.set("Access-Control-Expose-Headers", "WWW-Authenticate, Mcp-Session-Id, Retry-After");
    if (ctx.method === "OPTIONS") {
      ctx.set("Access-Control-Allow-Methods", options.methods);
      ctx.set(
        "Access-Control-Allow-Headers",
        "Authorization, Content-Type, Accept, MCP-Protocol-Version, Context-Protocol-Version, Mcp-Session-Id, Last-Event-ID",
      );
      ctx.set("Access-Control-Max-Age", "600");
      ctx.status = 204;
      return;
    }
    await next();
  };
}
