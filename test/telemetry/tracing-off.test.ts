// Tracing is off unless an OTLP endpoint is configured, and off means free: the process loads no
// part of the OpenTelemetry SDK (only the API, which is a no-op by itself), and the MCP server gets
// the client's own `traceparent`, as the MCP 2026-07-28 transport says intermediaries pass it.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startBrokerProcess } from "../support/broker-process.ts";
import { projectRoot } from "../support/spawn.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { INITIALIZE_MESSAGE, mcpPostTo, mcpStatus } from "../support/mcp-probe.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { startV2McpServer, type V2McpServer } from "../support/v2-mcp-server.ts";
import { startOtlpReceiver } from "../support/otlp-receiver.ts";

const REPORT = path.join(projectRoot, "test/fixtures/report-loaded-otel.mjs");

/** The OpenTelemetry packages a real broker process loaded while it signed a user in and served /mcp. */
async function packagesLoaded(env: Record<string, string>): Promise<string[]> {
  const dir = mkdtempSync(path.join(tmpdir(), "mab-otel-off-"));
  try {
    const broker = await startBrokerProcess(dir, { NODE_OPTIONS: `--import ${REPORT}`, ...env });
    try {
      const { tokens } = await obtainTokens(broker.url);
      expect(await mcpStatus(broker.url, tokens.access_token)).toBe(200);
    } finally {
      broker.child.kill("SIGTERM");
      await broker.exited;
    }
    const line = /OTEL_PACKAGES_LOADED (\[.*\])/.exec(broker.output());
    if (!line) throw new Error(`the process did not report what it loaded: ${broker.output()}`);
    return JSON.parse(line[1]!) as string[];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("tracing off", () => {
  it("a broker without OTEL_EXPORTER_OTLP_ENDPOINT loads no OpenTelemetry SDK module; with it, the SDK is loaded", async () => {
    expect(await packagesLoaded({})).toEqual(["@opentelemetry/api"]);
    // The same check sees the SDK when tracing is on: it can tell the two apart.
    const receiver = await startOtlpReceiver();
    try {
      const loaded = await packagesLoaded({ OTEL_EXPORTER_OTLP_ENDPOINT: receiver.endpoint });
      expect(loaded).toEqual(expect.arrayContaining(["@opentelemetry/sdk-trace", "@opentelemetry/exporter-trace-otlp-proto"]));
      // Its spans went out on shutdown, in OTLP's default encoding.
      expect(receiver.contentTypes).toContain("application/x-protobuf");
    } finally {
      await receiver.close();
    }
  });

  describe("in front of a recording MCP server", () => {
    let mcp: V2McpServer;
    let t: TestBroker;
    beforeAll(async () => {
      mcp = await startV2McpServer();
      t = await startBroker({ MCP_SERVER_URL: mcp.url });
    });
    afterAll(async () => {
      await t?.stop();
      await mcp?.close();
    });

    it("passes the client's traceparent and tracestate to the MCP server unchanged", async () => {
      const { tokens } = await obtainTokens(t.url);
      const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
      const res = await mcpPostTo(`${t.url}/mcp`, tokens.access_token, INITIALIZE_MESSAGE, { traceparent, tracestate: "rojo=00f067aa0ba902b7" });
      expect(res.status).toBe(200);
      await res.body?.cancel();
      const seen = mcp.requests.find((r) => r.headers.traceparent !== undefined);
      expect(seen?.headers).toMatchObject({ traceparent, tracestate: "rojo=00f067aa0ba902b7" });
    });
  });
});
