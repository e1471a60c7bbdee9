// Turns every error into the response its route promises: OAuth JSON, an HTML page, or a JSON-RPC
// error for /mcp. The domain's errors (grants/errors.ts) carry only an OAuth code and a description;
// the status and headers are decided here, from the code. Unexpected errors are logged with the
// request id and answered 500 without details.
// A failure of the client's own request stream (it hung up mid-body, or sent bytes Node's HTTP parser
// refused) is the client's doing: logged at info, answered 400 if anyone is still listening. It is
// known by where it happened (http/body.ts marks it), never by its error code.
import type Koa from "koa";
import { OAuthError, statusOf, type ErrorFormat } from "./errors.ts";
import { RequestBodyUnreadable } from "./body.ts";
import { DomainError, PageError } from "../grants/errors.ts";
import { renderErrorPage } from "../views/error-page.ts";
import { isDatabaseUnavailable } from "../store/errors.ts";
import { firstLine } from "../lib/error-text.ts";

const DATABASE_RETRY_AFTER_SECONDS = 5;

interface HttpLikeError {
  status?: number;
  statusCode?: number;
  expose?: boolean;
  message?: string;
}

/** What an error tells the one who asked. */
export interface Problem {
  readonly status: number;
  readonly code: string;
  readonly description: string;
  readonly headers: Readonly<Record<string, string>>;
  /** Set when it is for the person at the browser: rendered as a page, even on an OAuth route. */
  readonly page?: { readonly title: string; readonly hint?: string | undefined };
}

/** The response an expected error stands for; undefined for anything else (a bug, a fault). */
export function problemOf(err: unknown): Problem | undefined {
  if (err instanceof OAuthError) return { status: err.status, code: err.code, description: err.description, headers: err.headers };
  if (!(err instanceof DomainError)) return undefined;
  return {
    status: (err instanceof PageError ? err.status : undefined) ?? statusOf(err.code),
    code: err.code,
    description: err.description,
    headers: err.retryAfterSeconds === undefined ? {} : { "Retry-After": String(err.retryAfterSeconds) },
    ...(err instanceof PageError ? { page: { title: err.title, hint: err.hint } } : {}),
  };
}

function send(ctx: Koa.Context, format: ErrorFormat, status: number, code: string, description: string, hint?: string, title?: string): void {
  const { state } = ctx;
  ctx.status = status;
  if (format === "page") {
    ctx.type = "text/html; charset=utf-8";
    ctx.body = renderErrorPage({ title: title ?? pageTitle(status), detail: description, hint, requestId: state.requestId });
  } else if (format === "jsonrpc") {
    ctx.body = { jsonrpc: "2.0", error: { code: -32000, message: description }, id: null };
  } else {
    ctx.set("Cache-Control", "no-store");
    ctx.body = { error: code, error_description: description };
  }
}

function pageTitle(status: number): string {
  if (status === 404) return "Page not found";
  if (status === 405) return "This page cannot be used this way";
  if (status === 403) return "Not allowed";
  if (status >= 500) return "Something went wrong";
  return "This request cannot be completed";
}

/**
 * How an answer for no route of the broker (404, 405) is rendered: as the route's format where a
 * router chose one (/mcp: JSON-RPC), else as a page for a browser (it asks for HTML before JSON:
 * a mistyped /acount), and as OAuth JSON for everyone else (curl, SDKs: they accept anything).
 */
function noRouteFormat(ctx: Koa.Context): ErrorFormat {
  return ctx.state.errorFormat ?? (ctx.accepts("json", "html") === "html" ? "page" : "oauth");
}

export interface ErrorHandlerOptions {
  /** The front page (PUBLIC_URL/), which a page for a mistyped address points to. */
  readonly frontPage?: string;
}

/** A 404 or 405 no route answered with a body: said in the format its asker reads. */
function answerNoRoute(ctx: Koa.Context, options: ErrorHandlerOptions): void {
  if (ctx.status === 404 && ctx.body === undefined) {
    const format = noRouteFormat(ctx);
    if (format === "page")
      send(
        ctx,
        format,
        404,
        "not_found",
        `There is no page at ${ctx.path}.`,
        options.frontPage ? `Check the address, or start from ${options.frontPage}` : "Check the address.",
      );
    else send(ctx, format, 404, "not_found", `No endpoint at ${ctx.method} ${ctx.path}.`);
  } else if (ctx.status === 405 && ctx.body === undefined && noRouteFormat(ctx) === "page") {
    // @koa/router's allowedMethods() set the status and Allow, and left the body to Koa's plain text.
    send(ctx, "page", 405, "invalid_request", `${ctx.path} does not take ${ctx.method} requests (only ${ctx.response.get("Allow") || "other methods"}).`);
  }
}

/** An error the broker expected (problemOf), or a 4xx Koa or the body parser raised: true when answered. */
function answerExpected(ctx: Koa.Context, format: ErrorFormat, err: unknown): boolean {
  const problem = problemOf(err);
  if (problem) {
    for (const [k, v] of Object.entries(problem.headers)) ctx.set(k, v);
    if (problem.page) {
      send(ctx, format === "oauth" ? "page" : format, problem.status, problem.code, problem.description, problem.page.hint, problem.page.title);
    } else {
      if (problem.status >= 500) ctx.state.log.warn({ err: firstLine(err) }, "oauth error");
      send(ctx, format, problem.status, problem.code, problem.description);
    }
    return true;
  }
  const e = err as HttpLikeError;
  const status = e.status ?? e.statusCode;
  if (status && status >= 400 && status < 500 && e.expose !== false) {
    // Client errors raised by Koa or body parsing (413, 415, 400): safe to describe.
    send(ctx, format, status, "invalid_request", e.message ?? "Bad request.");
    return true;
  }
  return false;
}

/** Not a bug: the database is down or unreachable. Clients retry; the operator sees why. */
function answerDatabaseUnavailable(ctx: Koa.Context, format: ErrorFormat, err: unknown): void {
  ctx.state.log.warn({ err: firstLine(err) }, "database unreachable");
  ctx.set("Retry-After", String(DATABASE_RETRY_AFTER_SECONDS));
  send(
    ctx,
    format,
    503,
    "temporarily_unavailable",
    "The service cannot use its database right now (unreachable, busy or not writable). Please try again in a few seconds.",
    undefined,
    "Temporarily unavailable",
  );
}

export function errorHandler(options: ErrorHandlerOptions = {}): Koa.Middleware {
  return async (ctx, next) => {
    const { state } = ctx;
    try {
      await next();
      answerNoRoute(ctx, options);
    } catch (err) {
      const format = state.errorFormat ?? "oauth";
      // Only a body reader of http/body.ts says the client's stream failed. Any other error with
      // ECONNRESET (a database or upstream socket) goes on below: once the body was read, Node
      // marks the request destroyed, so "the request was cut short" cannot tell them apart.
      if (err instanceof RequestBodyUnreadable) state.log.info({ code: err.streamCode }, "client request body failed");
      if (answerExpected(ctx, format, err)) return;
      if (isDatabaseUnavailable(err)) return answerDatabaseUnavailable(ctx, format, err);
      state.log.error({ err }, "unexpected error");
      send(
        ctx,
        format,
        500,
        "server_error",
        `An unexpected error occurred (reference ${state.requestId}). Please try again; if it persists, tell the operator this reference.`,
      );
    }
  };
}
