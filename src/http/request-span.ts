// One server span per request when tracing is on (app.ts adds this middleware only then): it
// continues the caller's W3C trace context (`traceparent`), and every span the request's work
// starts (grants, hot store, upstream IdP, the proxied MCP call) and every log line it writes sit
// under it. What the span holds: method, route, status, the redacted path and query (the request
// log's rule, logger.ts), the client id and the JSON-RPC method; never a token, code or secret.
import type Koa from "koa";
import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Tracer } from "@opentelemetry/api";
import { redactUrl } from "../logger.ts";
import { recordFailure } from "../telemetry/span.ts";

export function requestSpans(tracer: Tracer): Koa.Middleware {
  return async (ctx, next) => {
    const parent = propagation.extract(ROOT_CONTEXT, ctx.req.headers);
    const shown = redactUrl(ctx.originalUrl);
    const q = shown.indexOf("?");
    const span = tracer.startSpan(
      ctx.method,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "http.request.method": ctx.method,
          "url.path": q < 0 ? shown : shown.slice(0, q),
          ...(q < 0 ? {} : { "url.query": shown.slice(q + 1) }),
          "url.scheme": ctx.protocol,
        },
      },
      parent,
    );
    try {
      await context.with(trace.setSpan(parent, span), next);
    } catch (err) {
      // The error middleware answers every error; one that escapes it is the process's fault.
      recordFailure(span, err);
      throw err;
    } finally {
      // Known once the router has matched: the pattern, not the path (a bounded set of names).
      const route = ctx.state.route ?? (ctx as { _matchedRoute?: unknown })._matchedRoute;
      if (typeof route === "string") {
        span.setAttribute("http.route", route);
        span.updateName(`${ctx.method} ${route}`);
      }
      // The proxy writes its answer itself (ctx.respond = false): the status is the one it sent.
      const status = ctx.respond === false ? ctx.res.statusCode : ctx.status;
      span.setAttribute("http.response.status_code", status);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      const clientId = ctx.state.identity?.clientId ?? (typeof ctx.query.client_id === "string" ? ctx.query.client_id : undefined);
      if (clientId) span.setAttribute("oauth.client.id", clientId);
      const rpcMethods = ctx.state.rpcMethods?.();
      if (rpcMethods?.length) span.setAttribute("mcp.method.name", rpcMethods.join(","));
      if (ctx.state.grantType) span.setAttribute("oauth.grant_type", ctx.state.grantType);
      // An event stream the proxy still relays ends after the middleware returned: so does its span.
      // `on`: "close" comes once (a `once` wrapper would be kept while the stream is open).
      if (ctx.respond === false && !ctx.res.writableFinished) ctx.res.on("close", () => span.end());
      else span.end();
    }
  };
}
