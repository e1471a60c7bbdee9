// Where the broker sends what it sees, beyond its log and /metrics: OpenTelemetry traces (the
// standard OTEL_* variables, read here rather than by the SDK so that `.env` counts too) and the
// audit stream (AUDIT_SINK). Parsed once at start with the rest of the configuration.
import path from "node:path";
import { z } from "zod";
import { ConfigError, commaList, isLoopbackHost, type Env } from "./values.ts";

/** How spans are chosen (OTEL_TRACES_SAMPLER); `ratio` applies to the traceidratio ones. */
export type SamplerKind = "always_on" | "always_off" | "traceidratio" | "parentbased_always_on" | "parentbased_always_off" | "parentbased_traceidratio";

export interface TracingConfig {
  /** Where spans are posted: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_EXPORTER_OTLP_ENDPOINT + /v1/traces. */
  readonly endpoint: string;
  readonly protocol: "http/protobuf" | "http/json";
  /** Sent with every export (a collector's API key): OTEL_EXPORTER_OTLP_(TRACES_)HEADERS. */
  readonly headers: Readonly<Record<string, string>>;
  readonly timeoutMs: number;
  readonly serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES: what every span says about this process (deployment.environment=prod). */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  readonly sampler: SamplerKind;
  readonly samplerRatio: number;
  /** OTEL_BSP_SCHEDULE_DELAY: how long finished spans wait to be sent in one batch. */
  readonly scheduleDelayMs: number;
}

export type AuditSinkConfig =
  | { readonly kind: "stdout" }
  /** Appended to; reopened on SIGHUP (logrotate moves the file away, then signals). */
  | { readonly kind: "file"; readonly path: string }
  /** Batches of JSON lines, signed with AUDIT_SINK_SECRET. */
  | { readonly kind: "webhook"; readonly url: string; readonly secret: string };

export interface ObservabilityConfig {
  /** Undefined: tracing is off, and no part of the OpenTelemetry SDK is loaded. */
  readonly tracing: TracingConfig | undefined;
  readonly auditSink: AuditSinkConfig | undefined;
}

const SAMPLERS: readonly SamplerKind[] = [
  "always_on",
  "always_off",
  "traceidratio",
  "parentbased_always_on",
  "parentbased_always_off",
  "parentbased_traceidratio",
];

function value(env: Env, name: string): string | undefined {
  const raw = env[name]?.trim();
  return raw ? raw : undefined;
}

function absoluteUrl(name: string, raw: string): URL {
  try {
    const url = new URL(raw);
    if (url.protocol === "http:" || url.protocol === "https:") return url;
  } catch {
    // reported below
  }
  throw new ConfigError(name, `expected an http(s) URL such as http://otel-collector:4318, got ${JSON.stringify(raw.slice(0, 80))}`);
}

/** `key=value,key2=value2` with percent-encoded values: the format of OTEL_*_HEADERS and OTEL_RESOURCE_ATTRIBUTES. */
function keyValueList(name: string, raw: string | undefined): Record<string, string> {
  const pairs: Record<string, string> = {};
  for (const entry of commaList(raw)) {
    const at = entry.indexOf("=");
    const key = at > 0 ? entry.slice(0, at).trim() : "";
    if (!key) throw new ConfigError(name, `expected key=value pairs separated by commas, got ${JSON.stringify(entry.slice(0, 60))}`);
    let decoded: string;
    try {
      decoded = decodeURIComponent(entry.slice(at + 1).trim());
    } catch {
      throw new ConfigError(name, `the value of ${key} is not valid percent-encoding`);
    }
    pairs[key] = decoded;
  }
  return pairs;
}

function milliseconds(env: Env, name: string, fallback: number): number {
  const raw = value(env, name);
  if (raw === undefined) return fallback;
  const ms = Number(raw);
  if (!Number.isInteger(ms) || ms < 1 || ms > 600_000)
    throw new ConfigError(name, `expected a whole number of milliseconds from 1 to 600000, got ${JSON.stringify(raw)}`);
  return ms;
}

function protocolOf(env: Env): TracingConfig["protocol"] {
  const traces = value(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL");
  const raw = traces ?? value(env, "OTEL_EXPORTER_OTLP_PROTOCOL") ?? "http/protobuf";
  const name = traces ? "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL" : "OTEL_EXPORTER_OTLP_PROTOCOL";
  if (raw === "http/protobuf" || raw === "http/json") return raw;
  throw new ConfigError(name, `expected http/protobuf or http/json (the broker exports over OTLP/HTTP; grpc is not supported), got ${JSON.stringify(raw)}`);
}

/** The traces endpoint, or undefined when tracing is off. */
function tracesEndpoint(env: Env): string | undefined {
  if (["true", "1"].includes(value(env, "OTEL_SDK_DISABLED")?.toLowerCase() ?? "")) return undefined;
  const exporters = commaList(value(env, "OTEL_TRACES_EXPORTER"));
  if (exporters.includes("none")) return undefined;
  const unknown = exporters.filter((e) => e !== "otlp");
  if (unknown.length) throw new ConfigError("OTEL_TRACES_EXPORTER", `expected otlp or none, got ${JSON.stringify(unknown.join(","))}`);
  const signal = value(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  if (signal) return absoluteUrl("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", signal).href;
  const base = value(env, "OTEL_EXPORTER_OTLP_ENDPOINT");
  if (!base) return undefined;
  // The specification's rule: the base endpoint gets the signal's path appended.
  const url = absoluteUrl("OTEL_EXPORTER_OTLP_ENDPOINT", base);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}/v1/traces`;
  return url.href;
}

function parseTracing(env: Env): TracingConfig | undefined {
  const endpoint = tracesEndpoint(env);
  if (endpoint === undefined) return undefined;
  const sampler = (value(env, "OTEL_TRACES_SAMPLER") ?? "parentbased_always_on") as SamplerKind;
  if (!SAMPLERS.includes(sampler)) throw new ConfigError("OTEL_TRACES_SAMPLER", `expected one of ${SAMPLERS.join(", ")}, got ${JSON.stringify(sampler)}`);
  const ratioRaw = value(env, "OTEL_TRACES_SAMPLER_ARG");
  const samplerRatio = ratioRaw === undefined ? 1 : Number(ratioRaw);
  if (!(samplerRatio >= 0 && samplerRatio <= 1))
    throw new ConfigError(
      "OTEL_TRACES_SAMPLER_ARG",
      `expected a sampling ratio from 0 to 1 (0.25 keeps a quarter of the traces), got ${JSON.stringify(ratioRaw)}`,
    );
  const resourceAttributes = keyValueList("OTEL_RESOURCE_ATTRIBUTES", value(env, "OTEL_RESOURCE_ATTRIBUTES"));
  return {
    endpoint,
    protocol: protocolOf(env),
    headers: {
      ...keyValueList("OTEL_EXPORTER_OTLP_HEADERS", value(env, "OTEL_EXPORTER_OTLP_HEADERS")),
      ...keyValueList("OTEL_EXPORTER_OTLP_TRACES_HEADERS", value(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS")),
    },
    timeoutMs: milliseconds(env, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", milliseconds(env, "OTEL_EXPORTER_OTLP_TIMEOUT", 10_000)),
    // OTEL_SERVICE_NAME wins over a service.name among the resource attributes (the specification's order).
    serviceName: value(env, "OTEL_SERVICE_NAME") ?? resourceAttributes["service.name"] ?? "mcp-auth-broker",
    resourceAttributes,
    sampler,
    samplerRatio,
    scheduleDelayMs: milliseconds(env, "OTEL_BSP_SCHEDULE_DELAY", 5000),
  };
}

const SINK_EXPECTATION = "stdout, file:/path/to/audit.log, or the https:// URL of a webhook";

function parseAuditSink(env: Env, cwd: string): AuditSinkConfig | undefined {
  const raw = value(env, "AUDIT_SINK");
  if (raw === undefined) return undefined;
  if (raw === "stdout") return { kind: "stdout" };
  if (raw.startsWith("file:")) {
    const file = raw.slice("file:".length);
    if (!file) throw new ConfigError("AUDIT_SINK", `expected a path after file:, e.g. file:/var/log/mcp-auth-broker/audit.log`);
    return { kind: "file", path: path.resolve(cwd, file) };
  }
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError("AUDIT_SINK", `expected ${SINK_EXPECTATION}, got ${JSON.stringify(raw.slice(0, 80))}`);
  }
  // The events name users and addresses: only a local receiver (a collector's agent) may take them unencrypted.
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname)))
    throw new ConfigError("AUDIT_SINK", `expected ${SINK_EXPECTATION} (plain http only to localhost/127.0.0.1), got ${JSON.stringify(raw.slice(0, 80))}`);
  if (url.username || url.password || url.hash) throw new ConfigError("AUDIT_SINK", "expected a webhook URL without user name, password or fragment");
  const secret = z.string().min(32).safeParse(value(env, "AUDIT_SINK_SECRET"));
  if (!secret.success)
    throw new ConfigError(
      "AUDIT_SINK_SECRET",
      `expected at least 32 characters to sign the webhook's deliveries with (required with an https:// AUDIT_SINK), e.g. node -e "console.log(require('crypto').randomBytes(32).toString('base64url'))"`,
    );
  return { kind: "webhook", url: url.href, secret: secret.data };
}

export function parseObservability(env: Env, cwd: string): ObservabilityConfig {
  return { tracing: parseTracing(env), auditSink: parseAuditSink(env, cwd) };
}
