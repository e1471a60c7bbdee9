// The broker's Koa application: Koa's, except for when it starts watching a response for errors.
//
// Koa (application.js, handleRequest) attaches on-finished to every response before its middleware
// runs: listeners on the response and on its socket (ee-first), and a closure keeping the request's
// whole context, for as long as the response is open. Its only work is to pass a socket error to
// ctx.onerror, which in an application that is `silent` and has no "error" listener of its own (the
// broker's) emits an event nobody hears and writes an answer to a socket that is gone. For an MCP
// event stream, open for hours, that cost about 2.4 KB of heap per stream (bench row (s)).
//
// Here the middleware runs first. A response the middleware wrote itself (ctx.respond = false: the
// proxy and the stdio bridge) is left as it is; any other is handed to Koa's own handleRequest,
// which attaches on-finished and writes ctx.body as Koa always does.
import Koa from "koa";

type Run = (ctx: Koa.Context) => Promise<void>;

/** The method Koa's callback() calls for each request (application.js); its type declarations omit it. */
interface KoaRequestHandling {
  handleRequest(ctx: Koa.Context, fnMiddleware: Run): Promise<void>;
}

const koaHandleRequest = (Koa.prototype as unknown as KoaRequestHandling).handleRequest;
if (typeof koaHandleRequest !== "function") {
  throw new Error("koa no longer has Application.prototype.handleRequest: src/http/koa-application.ts must follow its new callback()");
}

export class BrokerApplication extends Koa implements KoaRequestHandling {
  handleRequest(ctx: Koa.Context, fnMiddleware: Run): Promise<void> {
    // Koa's default before the middleware: a request nothing answered is a 404.
    ctx.res.statusCode = 404;
    return fnMiddleware(ctx).then(
      () => {
        if (ctx.respond === false) return;
        // Koa's handleRequest sets 404 again before it runs its argument: the status the
        // middleware left is put back, then Koa writes the body.
        const status = ctx.res.statusCode;
        return koaHandleRequest.call(this, ctx, () => {
          ctx.res.statusCode = status;
          return Promise.resolve();
        });
      },
      (err: unknown) => ctx.onerror(err as Error),
    );
  }
}
