// Gives every request an id and a child logger, and logs one line per request (URL redacted).
import { randomUUID } from "node:crypto";
import type Koa from "koa";
import { redactUrl, type Logger } from "../logger.ts";
import type { ErrorFormat } from "./errors.ts";
import type { CallerIdentity } from "../gateway/identity.ts";

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
  refusal?: "session_owner";
  /** The grant type of a /token request (metrics count successful ones). */
  grantType?: string;
}

// The one declaration of the state's type: every Koa and @koa/router middleware sees it as
// ctx.state, with no cast (as the MCP SDK declares req.auth).
declare module "koa" {
  interface DefaultState extends RequestState {}
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{8,128}$/;

/**
 * `quietPaths` (and what lies below them) log their request line at debug: the /mcp hot path and
 * the probes, so that info logs stay readable under load.
 */
export function requestContext(logger: Logger, quietPaths: readonly string[] = []): Koa.Middleware {
  const isQuiet = (path: string) => quietPaths.some((q) => path === q || path.startsWith(`${q}/`));
  return async (ctx, next) => {
    const incoming = ctx.get("x-request-id");
    const requestId = SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    const state = ctx.state;
    state.requestId = requestId;
    // The child logger (with its redaction setup) is made on first use: most /mcp requests log nothing.
    let child: Logger | undefined;
    Object.defineProperty(state, "log", { get: () => (child ??= logger.child({ requestId })), enumerable: true, configurable: true });
    ctx.set("X-Request-Id", requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      const level = isQuiet(ctx.path) ? "debug" : "info";
      if (logger.isLevelEnabled(level)) {
        const ms = Math.round((performance.now() - started) * 10) / 10;
        state.log[level]({ method: ctx.method, url: redactUrl(ctx.originalUrl), status: ctx.status, ms }, "request");
      }
    }
  };
}
