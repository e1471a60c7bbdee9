// The body of every error the MCP endpoint answers itself: JSON-RPC, which is what MCP clients read.
import type Koa from "koa";

/** `id`: the refused request's own, when the body was read; null when it was not (or has none). */
export function jsonRpcError(ctx: Koa.Context, status: number, code: number, message: string, id: string | number | null = null): void {
  ctx.status = status;
  ctx.set("Cache-Control", "no-store");
  ctx.body = { jsonrpc: "2.0", error: { code, message }, id };
}
