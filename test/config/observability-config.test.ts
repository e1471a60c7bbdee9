// The OTEL_* variables as the OpenTelemetry specification defines them, read by the broker's own
// configuration (so `.env` counts too), and the mistakes an operator makes with them.
import { describe, expect, it } from "@jest/globals";
import { ConfigError } from "../../src/config/load.ts";
import { parseObservability } from "../../src/config/observability.ts";

const tracing = (env: Record<string, string>) => parseObservability(env, "/srv/broker").tracing;

function problem(env: Record<string, string>): ConfigError {
  try {
    parseObservability(env, "/srv/broker");
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("no configuration error");
}

describe("tracing configuration", () => {
  it("is off without an endpoint, and off with one when the SDK or the exporter is switched off", () => {
    expect(tracing({})).toBeUndefined();
    expect(tracing({ OTEL_SERVICE_NAME: "x", OTEL_TRACES_SAMPLER: "always_on" })).toBeUndefined();
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" })).toBeUndefined();
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" })).toBeUndefined();
  });

  it("appends /v1/traces to the base endpoint, and takes the traces endpoint as it is", () => {
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318" })?.endpoint).toBe("http://collector:4318/v1/traces");
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: "https://otlp.example.com/otlp/" })?.endpoint).toBe("https://otlp.example.com/otlp/v1/traces");
    expect(
      tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://collector:4318", OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://other:9999/custom/path" })?.endpoint,
    ).toBe("http://other:9999/custom/path");
  });

  it("has the specification's defaults", () => {
    expect(tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318" })).toEqual({
      endpoint: "http://c:4318/v1/traces",
      protocol: "http/protobuf",
      headers: {},
      timeoutMs: 10_000,
      serviceName: "mcp-auth-broker",
      resourceAttributes: {},
      sampler: "parentbased_always_on",
      samplerRatio: 1,
      scheduleDelayMs: 5000,
    });
  });

  it("reads headers and resource attributes as percent-encoded key=value lists; the signal's own variables win", () => {
    const config = tracing({
      OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
      OTEL_EXPORTER_OTLP_HEADERS: "x-api-key=abc%3D%3D,tenant=a",
      OTEL_EXPORTER_OTLP_TRACES_HEADERS: "tenant=b",
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf",
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/json",
      OTEL_EXPORTER_OTLP_TIMEOUT: "3000",
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "2000",
      OTEL_RESOURCE_ATTRIBUTES: "service.name=from-attributes,deployment.environment=prod%20eu",
      OTEL_TRACES_SAMPLER: "parentbased_traceidratio",
      OTEL_TRACES_SAMPLER_ARG: "0.25",
    });
    expect(config).toMatchObject({
      headers: { "x-api-key": "abc==", tenant: "b" },
      protocol: "http/json",
      timeoutMs: 2000,
      // A service.name among the resource attributes counts when OTEL_SERVICE_NAME is not set.
      serviceName: "from-attributes",
      resourceAttributes: { "deployment.environment": "prod eu" },
      sampler: "parentbased_traceidratio",
      samplerRatio: 0.25,
    });
    expect(
      tracing({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SERVICE_NAME: "broker-eu", OTEL_RESOURCE_ATTRIBUTES: "service.name=x" })?.serviceName,
    ).toBe("broker-eu");
  });

  it.each([
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" }, "OTEL_EXPORTER_OTLP_ENDPOINT"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" }, "OTEL_EXPORTER_OTLP_PROTOCOL"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_SAMPLER: "sometimes" }, "OTEL_TRACES_SAMPLER"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_SAMPLER_ARG: "2" }, "OTEL_TRACES_SAMPLER_ARG"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_EXPORTER_OTLP_HEADERS: "no-equals-sign" }, "OTEL_EXPORTER_OTLP_HEADERS"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "zipkin" }, "OTEL_TRACES_EXPORTER"],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_BSP_SCHEDULE_DELAY: "soon" }, "OTEL_BSP_SCHEDULE_DELAY"],
  ])("refuses %j, naming %s", (env, variable) => {
    expect(problem(env).variable).toBe(variable);
  });
});

describe("audit sink configuration", () => {
  const sink = (env: Record<string, string>) => parseObservability(env, "/srv/broker").auditSink;
  const secret = "s".repeat(32);

  it("is off when unset; stdout; a file, relative to the working folder", () => {
    expect(sink({})).toBeUndefined();
    expect(sink({ AUDIT_SINK: "stdout" })).toEqual({ kind: "stdout" });
    expect(sink({ AUDIT_SINK: "file:/var/log/mab/audit.log" })).toEqual({ kind: "file", path: "/var/log/mab/audit.log" });
    expect(sink({ AUDIT_SINK: "file:data/audit.log" })).toEqual({ kind: "file", path: "/srv/broker/data/audit.log" });
  });

  it("takes an https webhook with its secret, and plain http only to this machine", () => {
    expect(sink({ AUDIT_SINK: "https://siem.example.com/ingest?source=mab", AUDIT_SINK_SECRET: secret })).toEqual({
      kind: "webhook",
      url: "https://siem.example.com/ingest?source=mab",
      secret,
    });
    expect(sink({ AUDIT_SINK: "http://127.0.0.1:8088/audit", AUDIT_SINK_SECRET: secret })).toMatchObject({ kind: "webhook" });
    expect(sink({ AUDIT_SINK: "http://localhost:8088/audit", AUDIT_SINK_SECRET: secret })).toMatchObject({ kind: "webhook" });
  });

  it.each([
    [{ AUDIT_SINK: "http://siem.example.com/ingest", AUDIT_SINK_SECRET: secret }, "AUDIT_SINK"],
    [{ AUDIT_SINK: "http://10.0.0.5/ingest", AUDIT_SINK_SECRET: secret }, "AUDIT_SINK"],
    [{ AUDIT_SINK: "syslog" }, "AUDIT_SINK"],
    [{ AUDIT_SINK: "file:" }, "AUDIT_SINK"],
    [{ AUDIT_SINK: "https://user:pw@siem.example.com/", AUDIT_SINK_SECRET: secret }, "AUDIT_SINK"],
    [{ AUDIT_SINK: "https://siem.example.com/ingest" }, "AUDIT_SINK_SECRET"],
    [{ AUDIT_SINK: "https://siem.example.com/ingest", AUDIT_SINK_SECRET: "short" }, "AUDIT_SINK_SECRET"],
  ])("refuses %j, naming %s", (env, variable) => {
    expect(problem(env).variable).toBe(variable);
  });
});
