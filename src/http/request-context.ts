// Gives every request an id and a child logger, and logs one line per request (URL redacted).
import { createHash } from "node:crypto";
import type Koa from "koa";
import { redactUrl, type Logger } from "../logger.ts";
import type { ErrorFormat } from "./errors.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { isUnder } from "./public-paths.ts";
import { randomUuid } from "../lib/random-uuid.ts";
import { carryRequestId } from "./answer-headers.ts";

/** What the broker's middleware keep in `ctx.state`, for every route. */
export interface RequestState {
  /** Set by requestContext (below) before anything else runs. */
  requestId: string;
  /** The request's child logger (with its request id); set by requestContext. */
  log: Logger;
  /** How the error middleware renders this route's errors; set by the router (default: OAuth JSON). */
  errorFormat?: ErrorFormat;
  /** The authenticated caller of /mcp; set by the bearer middleware (gateway/bearer.ts). */
  identity?: CallerIdentity;
  /** Why this request was refused, when its status alone does not say (metrics). */
  refusal?: "session_owner" | "policy_denied" | "tool_denied";
  /** The grant type of a /token request (metrics count successful ones). */
  grantType?: string;
  /**
   * The JSON-RPC method(s) of an /mcp request, for its access line and span: scanned from the body
   * on the first call, which only a log line or a span makes.
   */
  rpcMethods?: () => readonly string[];
  /** The catalogue server an /mcp request was for (its name), for its access line and metrics. */
  server?: string;
  /** The route's pattern (a mount, not the path), for the request span; routers leave theirs in ctx._matchedRoute. */
  route?: string;
}

// The one declaration of the state's type: every Koa and @koa/router middleware sees it as
// ctx.state, with no cast (as the MCP SDK declares req.auth).
declare module "koa" {
  interface DefaultState extends RequestState {}
}

/** Bytes that crossed the connection during this request (a keep-alive socket carries several). */
interface ByteMark {
  readonly read: number;
  readonly written: number;
}

function mcpAccessFields(ctx: Koa.Context, ms: number, mark: ByteMark): Record<string, unknown> {
  const { identity, server } = ctx.state;
  const rpcMethods = ctx.state.rpcMethods?.();
  const session = ctx.get("mcp-session-id") || ctx.response.get("mcp-session-id");
  return {
    method: ctx.method,
    url: redactUrl(ctx.originalUrl),
    ...(server ? { server } : {}),
    ...(rpcMethods?.length ? { rpc: rpcMethods.join(",") } : {}),
    status: ctx.res.statusCode,
    ms,
    ...(identity ? { subject: identity.subject, clientId: identity.clientId } : {}),
    ...(session ? { session: sessionTag(String(session)) } : {}),
    // A small body was already read with the headers, before this request's mark: its length says it.
    bytesIn: Number(ctx.get("content-length")) || ctx.req.socket.bytesRead - mark.read,
    bytesOut: ctx.req.socket.bytesWritten - mark.written,
  };
}

/** Milliseconds since `started` (performance.now()), to a tenth. */
const msSince = (started: number) => Math.round((performance.now() - started) * 10) / 10;

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{8,128}$/;

/**
 * ctx.state as requestContext makes it: the request id, and the child logger made on first use
 * (most /mcp requests log nothing). A class: its getter is shared, where a property defined per
 * request cost a closure and a new shape each time.
 */
class BrokerRequestState {
  #child: Logger | undefined;

  constructor(
    readonly requestId: string,
    private readonly logger: Logger,
  ) {}

  get log(): Logger {
    this.#child ??= this.logger.child({ requestId: this.requestId });
    return this.#child;
  }
}

/** A short, stable name for an MCP session in logs: never the session id itself (it is a credential of sorts). */
export function sessionTag(sessionId: string): string {
  return createHash("sha256").update(sessionId).digest("hex").slice(0, 12);
}

/**
 * One line per request at info. `mcpPaths` (the MCP endpoint) get an access line with what an
 * operator needs to follow a client: the JSON-RPC method(s), the caller (subject and client id), a
 * hash of the MCP session id and the bytes, written when the response has ended (a stream's line
 * says how long it stayed open). `quietPaths` (the probes) log at debug.
 */
export function requestContext(logger: Logger, quietPaths: readonly string[] = [], mcpPaths: readonly string[] = []): Koa.Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get("x-request-id");
    const requestId = SAFE_REQUEST_ID.test(incoming) ? incoming : randomUuid();
    // Nothing has written to the state before this middleware: it is replaced whole.
    const state: RequestState = new BrokerRequestState(requestId, logger);
    ctx.state = state;
    carryRequestId(ctx.res, requestId);
    const started = performance.now();
    // Only when the access line will be written: the bytes the connection had carried before this request.
    const mark: ByteMark | undefined = logger.isLevelEnabled("info") ? { read: ctx.req.socket.bytesRead, written: ctx.req.socket.bytesWritten } : undefined;
    try {
      await next();
    } finally {
      if (isUnder(mcpPaths, ctx.path)) {
        if (mark && logger.isLevelEnabled("info")) {
          const line = () => state.log.info(mcpAccessFields(ctx, msSince(started), mark), "mcp");
          // A streamed answer (the proxy's) is still going: its line is written when it ends.
          // `on`: "close" comes once, and a `once` wrapper would be kept for as long as the stream is open.
          if (ctx.respond === false && !ctx.res.writableEnded) ctx.res.on("close", line);
          else line();
        }
      } else {
        const level = isUnder(quietPaths, ctx.path) ? "debug" : "info";
        if (logger.isLevelEnabled(level))
          state.log[level]({ method: ctx.method, url: redactUrl(ctx.originalUrl), status: ctx.status, ms: msSince(started) }, "request");
      }
    }
  };
}
