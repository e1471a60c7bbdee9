// The proxied call to the MCP server as a client span, child of the request's span, when tracing is
// on: it lasts until the answer has streamed to the client, and the MCP server receives its trace
// context (`traceparent` naming this span) instead of the client's, so its spans sit under it. With
// tracing off there is no span, and the client's `traceparent` passes unchanged (proxy-headers.ts).
import { context, propagation, SpanKind, SpanStatusCode, trace, type Context, type Span } from "@opentelemetry/api";
import { activeTracer, recordFailure } from "../telemetry/span.ts";
import { redactUrl } from "../logger.ts";

export interface ProxySpan {
  readonly span: Span;
  readonly context: Context;
  ended: boolean;
}

/** A span for the call about to be made to `target` (origin) at `path`; undefined with tracing off. */
export function startProxySpan(target: URL, method: string, path: string): ProxySpan | undefined {
  const tracer = activeTracer();
  if (tracer === undefined) return undefined;
  const span = tracer.startSpan(
    method,
    {
      kind: SpanKind.CLIENT,
      attributes: {
        "http.request.method": method,
        "server.address": target.hostname,
        "server.port": Number(target.port) || (target.protocol === "https:" ? 443 : 80),
        "url.full": redactUrl(`${target.origin}${path}`),
      },
    },
    context.active(),
  );
  return { span, context: trace.setSpan(context.active(), span), ended: false };
}

/** The MCP server's request headers, with the proxy span's trace context when there is one. */
export function withProxyTraceContext<H extends Record<string, string>>(proxySpan: ProxySpan | undefined, headers: H): H {
  if (proxySpan) propagation.inject(proxySpan.context, headers);
  return headers;
}

export function proxyAnswered(proxySpan: ProxySpan | undefined, status: number): void {
  if (!proxySpan) return;
  proxySpan.span.setAttribute("http.response.status_code", status);
  if (status >= 500) proxySpan.span.setStatus({ code: SpanStatusCode.ERROR });
}

/** Ends the span (once), failed when `err` is given. */
export function endProxySpan(proxySpan: ProxySpan | undefined, err?: unknown): void {
  if (!proxySpan || proxySpan.ended) return;
  proxySpan.ended = true;
  if (err !== undefined) recordFailure(proxySpan.span, err);
  proxySpan.span.end();
}
