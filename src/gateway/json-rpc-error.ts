// The body of every error the MCP endpoint answers itself: JSON-RPC, which is what MCP clients read.
import type Koa from "koa";

export function jsonRpcError(ctx: Koa.Context, status: number, code: number, message: string): void {
  ctx.status = status;
  ctx.set("Cache-Control", "no-store");
  ctx.body = { jsonrpc: "2.0", error: { code, message }, id: null };
}
