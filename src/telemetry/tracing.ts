// The one module that loads the OpenTelemetry SDK and its exporter: imported by broker.ts only when
// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set, so that a broker without tracing loads none of it.
// Spans are batched and posted over OTLP/HTTP (protobuf or JSON); incoming and outgoing trace
// context is W3C `traceparent`/`tracestate`; the active span follows async work through
// AsyncLocalStorage.
import { readFileSync } from "node:fs";
import path from "node:path";
import { context, diag, DiagLogLevel, propagation, trace, type DiagLogFunction } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter as OtlpJsonExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { OTLPTraceExporter as OtlpProtobufExporter } from "@opentelemetry/exporter-trace-otlp-proto";
import { defaultResource, resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
} from "@opentelemetry/sdk-trace";
import type { SamplerKind, TracingConfig } from "../config/observability.ts";
import { projectRoot } from "../project-root.ts";
import { useTracer } from "./span.ts";

export interface Tracing {
  /** Sends the spans ended so far. */
  flush(): Promise<void>;
  /** Sends what is left and stops tracing in this process. */
  shutdown(): Promise<void>;
}

export const TRACER_NAME = "mcp-auth-broker";

function sampler(kind: SamplerKind, ratio: number): Sampler {
  switch (kind) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return new TraceIdRatioBasedSampler(ratio);
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(ratio) });
  }
}

/**
 * What tracing says through the broker's logger (logger.ts, which itself imports the trace fields
 * of span.ts: the logger stays above this folder).
 */
export interface TracingLog {
  warn(fields: Record<string, unknown>, message: string): void;
  info(fields: Record<string, unknown>, message: string): void;
}

/** A collector that is down makes every export fail: said once a minute at most, not every few seconds. */
function diagnostics(logger: TracingLog): DiagLogFunction {
  let quietUntil = 0;
  return (message, ...args) => {
    const now = Date.now();
    if (now < quietUntil) return;
    quietUntil = now + 60_000;
    const detail = args.map((a) => (a instanceof Error ? a.message : typeof a === "string" ? a : "")).find(Boolean);
    logger.warn({ detail: detail?.slice(0, 300) }, `tracing: ${String(message).slice(0, 200)}`);
  };
}

function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(path.join(projectRoot, "package.json"), "utf8")) as { version: string }).version;
  } catch {
    return "unknown";
  }
}

export function startTracing(config: TracingConfig, logger: TracingLog): Tracing {
  const warn = diagnostics(logger);
  diag.setLogger({ error: warn, warn, info: () => undefined, debug: () => undefined, verbose: () => undefined }, DiagLogLevel.WARN);
  const exporterOptions = { url: config.endpoint, headers: { ...config.headers }, timeoutMillis: config.timeoutMs };
  const exporter = config.protocol === "http/json" ? new OtlpJsonExporter(exporterOptions) : new OtlpProtobufExporter(exporterOptions);
  const provider = new TracerProvider({
    resource: defaultResource().merge(
      resourceFromAttributes({ ...config.resourceAttributes, "service.name": config.serviceName, "service.version": packageVersion() }),
    ),
    sampler: sampler(config.sampler, config.samplerRatio),
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: config.scheduleDelayMs })],
  });
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(provider);
  useTracer(provider.getTracer(TRACER_NAME, packageVersion()));
  logger.info({ endpoint: config.endpoint, protocol: config.protocol, sampler: config.sampler }, "tracing on: spans are exported over OTLP");

  let stopped: Promise<void> | undefined;
  return {
    flush: () => provider.forceFlush(),
    shutdown() {
      stopped ??= (async () => {
        useTracer(undefined);
        try {
          await provider.shutdown();
        } finally {
          // The globals go too: a broker started later in this process (tests) starts afresh.
          trace.disable();
          propagation.disable();
          context.disable();
          diag.disable();
        }
      })();
      return stopped;
    },
  };
}
