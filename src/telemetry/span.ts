// Spans where the broker's work happens, through the OpenTelemetry API alone (no SDK, no exporter:
// telemetry/tracing.ts loads those, and only when tracing is configured). With tracing off every
// helper here is one comparison and then the work itself: no span object, no context switch.
//
// What a span may hold: names of routes, grant types, methods, client ids, hosts, statuses. Never a
// token, code, secret or a URL's query as sent (callers pass redacted values; errors are recorded by
// their type only, since a message may echo what a client sent).
import { context, propagation, SpanKind, SpanStatusCode, trace, type Attributes, type Span, type Tracer } from "@opentelemetry/api";

export { SpanKind };
export type { Attributes, Span };

let tracer: Tracer | undefined;

/** Called by telemetry/tracing.ts when tracing starts (a tracer) and stops (undefined). */
export function useTracer(next: Tracer | undefined): void {
  tracer = next;
}

/** The tracer while tracing is on: the HTTP edge starts its server spans with it. */
export function activeTracer(): Tracer | undefined {
  return tracer;
}

export interface SpanOptions {
  readonly kind?: SpanKind;
  /**
   * Only inside another span (a request's): work that also runs on timers (the revocation feed
   * polls the hot store twice a second) would otherwise send a lone trace each time.
   */
  readonly childOnly?: boolean;
}

/**
 * The error's kind, never its message: the domain's OAuth error code (`invalid_grant`), a system
 * error's code (`ECONNREFUSED`), an upstream error's kind (`unavailable`), or else the class name.
 */
function errorType(err: unknown): string {
  const e = err as { code?: unknown; error?: unknown; kind?: unknown; name?: unknown } | null;
  for (const candidate of [e?.code, e?.error, e?.kind, e?.name])
    if (typeof candidate === "string" && /^[A-Za-z][\w.-]{0,63}$/.test(candidate)) return candidate;
  return "Error";
}

/** Marks a span failed, with the error's type and no message. */
export function recordFailure(span: Span, err: unknown): void {
  span.setAttribute("error.type", errorType(err));
  span.setStatus({ code: SpanStatusCode.ERROR });
}

/**
 * Runs `work` inside a span named `name` (the active span's child), ended when the work settles;
 * with tracing off, just runs it (`span` is then undefined). Attributes that cost something to
 * compute are given as a function, called only when there is a span.
 */
export function inSpan<T>(
  name: string,
  attributes: Attributes | (() => Attributes),
  work: (span: Span | undefined) => Promise<T>,
  options: SpanOptions = {},
): Promise<T> {
  if (tracer === undefined) return work(undefined);
  if (options.childOnly && trace.getSpan(context.active()) === undefined) return work(undefined);
  const attrs = typeof attributes === "function" ? attributes() : attributes;
  return tracer.startActiveSpan(name, { kind: options.kind ?? SpanKind.INTERNAL, attributes: attrs }, async (span) => {
    try {
      return await work(span);
    } catch (err) {
      recordFailure(span, err);
      throw err;
    } finally {
      span.end();
    }
  });
}

/**
 * Adds the active span's W3C trace context (`traceparent`, and `tracestate` when there is one) to
 * the headers of an outgoing request; with tracing off, leaves them as they are.
 */
export function withTraceContext<H extends Record<string, string>>(headers: H): H {
  if (tracer !== undefined) propagation.inject(context.active(), headers);
  return headers;
}

/**
 * Each listed method of `target` runs in its own child span, `${prefix} ${method}` (a store's
 * statements, a provider's calls): for the wiring to apply when tracing is on, so that with tracing
 * off not even the check above is paid.
 */
export function tracedMethods<T extends object>(
  target: T,
  prefix: string,
  methods: readonly (keyof T & string)[],
  attributes: Attributes = {},
  kind: SpanKind = SpanKind.INTERNAL,
): T {
  const traced = Object.create(target) as T;
  for (const method of methods) {
    const original = target[method];
    if (typeof original !== "function") continue;
    const call = (original as (...args: unknown[]) => unknown).bind(target);
    const name = `${prefix} ${method}`;
    const attrs = { ...attributes, "code.function.name": method };
    (traced as Record<string, unknown>)[method] = (...args: unknown[]) => inSpan(name, attrs, async () => call(...args), { childOnly: true, kind });
  }
  return traced;
}

const NO_FIELDS: Readonly<Record<string, string>> = Object.freeze({});

/** pino's mixin merge (logger.ts): a line outside any span, or with tracing off, stays as it is. */
export function mergeTraceFields(line: object, fields: object): object {
  return fields === NO_FIELDS ? line : { ...fields, ...line };
}

/** `trace_id` and `span_id` of the active span, for log lines (logger.ts); none with tracing off. */
export function traceFields(): Readonly<Record<string, string>> {
  if (tracer === undefined) return NO_FIELDS;
  const span = trace.getSpan(context.active());
  if (span === undefined) return NO_FIELDS;
  const { traceId, spanId } = span.spanContext();
  return { trace_id: traceId, span_id: spanId };
}
