// Gives every request an id and a child logger, and logs one line per request (URL redacted).
import { randomUUID } from "node:crypto";
import type Koa from "koa";
import { redactUrl, type Logger } from "../logger.ts";

export interface RequestState {
  requestId: string;
  log: Logger;
  errorFormat?: import("./errors.ts").ErrorFormat;
}

const SAFE_REQUEST_ID = /^[A-Za-z0-9._-]{8,128}$/;

export function requestContext(logger: Logger): Koa.Middleware {
  return async (ctx, next) => {
    const incoming = ctx.get("x-request-id");
    const requestId = SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID();
    const state = ctx.state as RequestState;
    state.requestId = requestId;
    // The child logger (with its redaction setup) is made on first use: most /mcp requests log nothing.
    let child: Logger | undefined;
    Object.defineProperty(state, "log", { get: () => (child ??= logger.child({ requestId })), enumerable: true, configurable: true });
    ctx.set("X-Request-Id", requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      // The /mcp hot path and probes log at debug so info logs stay readable under load.
      const quiet = ctx.path === "/healthz" || ctx.path === "/readyz" || (/(^|\/)mcp(\/|$)/.test(ctx.path) && !ctx.path.includes("/.well-known/"));
      const level = quiet ? "debug" : "info";
      if (logger.isLevelEnabled(level)) {
        const ms = Math.round((performance.now() - started) * 10) / 10;
        state.log[level]({ method: ctx.method, url: redactUrl(ctx.originalUrl), status: ctx.status, ms }, "request");
      }
    }
  };
}
