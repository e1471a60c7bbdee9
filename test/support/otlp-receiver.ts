// An OTLP/HTTP trace receiver on 127.0.0.1, as an OpenTelemetry Collector's `otlp` receiver takes
// spans over HTTP: JSON bodies (OTEL_EXPORTER_OTLP_PROTOCOL=http/json) are decoded into every span
// they hold, flattened, with attributes as plain values; protobuf ones are only counted.
import http from "node:http";
import type { AddressInfo } from "node:net";

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** Empty for a trace's root span. */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's numbers: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, unknown>>;
  /** OTLP status code: 0 unset, 1 ok, 2 error. */
  readonly status: number;
  /** The resource's attributes (service.name…). */
  readonly resource: Readonly<Record<string, unknown>>;
  /** Everything the exporter sent about this span, as text, to search for what must not be there. */
  readonly raw: string;
}

export interface OtlpReceiver {
  /** The value for OTEL_EXPORTER_OTLP_ENDPOINT (the receiver answers POST /v1/traces). */
  readonly endpoint: string;
  readonly spans: ReceivedSpan[];
  /** The Content-Type of each export request. */
  readonly contentTypes: string[];
  close(): Promise<void>;
}

interface AnyValue {
  stringValue?: string;
  intValue?: number | string;
  doubleValue?: number;
  boolValue?: boolean;
  arrayValue?: { values?: AnyValue[] };
}
interface KeyValue {
  key: string;
  value: AnyValue;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: KeyValue[];
  status?: { code?: number };
}
interface ExportRequest {
  resourceSpans?: Array<{ resource?: { attributes?: KeyValue[] }; scopeSpans?: Array<{ spans?: OtlpSpan[] }> }>;
}

function plain(value: AnyValue): unknown {
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue);
  if (value.doubleValue !== undefined) return value.doubleValue;
  if (value.boolValue !== undefined) return value.boolValue;
  if (value.arrayValue) return (value.arrayValue.values ?? []).map(plain);
  return undefined;
}

function attributes(list: KeyValue[] | undefined): Record<string, unknown> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, plain(kv.value)]));
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const contentTypes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || req.url !== "/v1/traces") {
        res.writeHead(404).end();
        return;
      }
      const contentType = String(req.headers["content-type"]);
      contentTypes.push(contentType);
      // Protobuf exports (the exporters' default) are counted, not decoded: a test that reads spans asks for JSON.
      if (!contentType.startsWith("application/json")) {
        res.writeHead(200, { "content-type": contentType }).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as ExportRequest;
      for (const rs of body.resourceSpans ?? []) {
        const resource = attributes(rs.resource?.attributes);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: s.traceId,
              spanId: s.spanId,
              parentSpanId: s.parentSpanId ?? "",
              name: s.name,
              kind: s.kind,
              attributes: attributes(s.attributes),
              status: s.status?.code ?? 0,
              resource,
              raw: JSON.stringify(s),
            });
          }
        }
      }
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
