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
// proxy and the stdio bridge) is left as it is. The usual answer (a string, a Buffer or JSON, with
// a body, to anything but HEAD) is ended as Koa's respond() ends it. Anything else (no body, a
// stream, HEAD, a response already ended) is handed to Koa's own handleRequest, which attaches
// on-finished and writes ctx.body as Koa always does. Skipping on-finished for the usual answer: a
// bare JSON endpoint took 34 against 40 µs of server CPU per request (interleaved runs of 100,000).
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

/** Statuses whose response has no body (Koa's `statuses.empty`): Koa strips the body. */
const EMPTY_STATUSES = new Set([204, 205, 304]);

/**
 * The body, as Koa's respond() would write it, when the answer is the usual kind: a string, a
 * Buffer, or a plain object or array (JSON). Undefined for anything Koa writes otherwise.
 */
function plainBody(ctx: Koa.Context): string | Buffer | undefined {
  if (ctx.method === "HEAD" || EMPTY_STATUSES.has(ctx.status) || !ctx.writable) return undefined;
  const body: unknown = ctx.body;
  if (typeof body === "string" || Buffer.isBuffer(body)) return body;
  if (body === null || typeof body !== "object") return undefined;
  const prototype: unknown = Object.getPrototypeOf(body);
  if (prototype !== Object.prototype && prototype !== Array.prototype && prototype !== null) return undefined;
  // Koa reads anything with a pipe() as a stream.
  if (typeof (body as { pipe?: unknown }).pipe === "function") return undefined;
  const json = JSON.stringify(body);
  // As Koa's respond(): the length of what is sent, unless the headers are out already.
  if (!ctx.headerSent) ctx.length = Buffer.byteLength(json);
  return json;
}

export class BrokerApplication extends Koa implements KoaRequestHandling {
  handleRequest(ctx: Koa.Context, fnMiddleware: Run): Promise<void> {
    // Koa's default before the middleware: a request nothing answered is a 404.
    ctx.res.statusCode = 404;
    return fnMiddleware(ctx).then(
      () => {
        if (ctx.respond === false) return;
        const body = plainBody(ctx);
        if (body !== undefined) {
          ctx.res.end(body);
          return;
        }
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
