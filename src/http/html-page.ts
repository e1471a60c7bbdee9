// The broker's pages (views/) go out the same way from every router: a whole HTML document in UTF-8.
import type Koa from "koa";

export function sendHtml(ctx: Koa.Context, body: string, status = 200): void {
  ctx.status = status;
  ctx.type = "text/html; charset=utf-8";
  ctx.body = body;
}
