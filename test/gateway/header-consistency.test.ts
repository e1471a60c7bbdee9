// The header/body check both backends run before forwarding a request whose headers mirror its
// body (MCP 2026-07-28, basic/transports/streamable-http: "Value Encoding", "Server Validation").
import { describe, expect, it } from "@jest/globals";
import { decodeHeaderValue, headerMismatch, mirrorsBody, requestId } from "../../src/gateway/header-consistency.ts";

const meta = { "io.modelcontextprotocol/protocolVersion": "2026-07-28" };
const call = (name: string, extra: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  id: 1,
  method: "tools/call",
  params: { name, arguments: { region: "us-west1" }, _meta: meta, ...extra },
});
const modern = (extra: Record<string, string>) => ({ "mcp-protocol-version": "2026-07-28", ...extra });

describe("Base64 sentinel values", () => {
  // The spec's own table of encoding examples.
  it.each([
    ["us-west1", "us-west1"],
    ["=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, 世界"],
    ["=?base64?IHBhZGRlZCA=?=", " padded "],
    ["=?base64?bGluZTEKbGluZTI=?=", "line1\nline2"],
    ["=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?="],
  ])("decodes %j to %j", (header, value) => {
    expect(decodeHeaderValue(header)).toBe(value);
  });

  it.each([
    ["not Base64", "=?base64?***?="],
    ["unpadded", "=?base64?SGk?="],
    ["not UTF-8", `=?base64?${Buffer.from([0xff, 0xfe]).toString("base64")}?=`],
  ])("refuses a sentinel that is %s", (_what, header) => {
    expect(decodeHeaderValue(header)).toBeUndefined();
  });
});

describe("header/body consistency", () => {
  it("accepts headers that mirror the body, plain or Base64-encoded", () => {
    expect(headerMismatch(modern({ "mcp-method": "tools/call", "mcp-name": "get_weather" }), call("get_weather"))).toBeUndefined();
    expect(headerMismatch(modern({ "mcp-method": "tools/call", "mcp-name": "=?base64?SGVsbG8sIOS4lueVjA==?=" }), call("Hello, 世界"))).toBeUndefined();
    const read = { jsonrpc: "2.0", id: "r", method: "resources/read", params: { uri: "file:///projects/myapp/config.json", _meta: meta } };
    expect(headerMismatch(modern({ "mcp-method": "resources/read", "mcp-name": "file:///projects/myapp/config.json" }), read)).toBeUndefined();
    const discover = { jsonrpc: "2.0", id: 2, method: "server/discover", params: { _meta: meta } };
    expect(headerMismatch(modern({ "mcp-method": "server/discover" }), discover)).toBeUndefined();
  });

  it("leaves requests without mirrored headers alone (2025 clients), and the headers it does not read", () => {
    const legacy = { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "echo", arguments: {} } };
    expect(mirrorsBody({ "mcp-protocol-version": "2025-11-25" })).toBe(false);
    expect(headerMismatch({ "mcp-protocol-version": "2025-11-25" }, legacy)).toBeUndefined();
    expect(headerMismatch({}, [legacy, legacy])).toBeUndefined();
    // Which argument an Mcp-Param-* header mirrors is in the tool's schema: the MCP server's to check.
    expect(headerMismatch(modern({ "mcp-method": "tools/call", "mcp-name": "get_weather", "mcp-param-region": "eu" }), call("get_weather"))).toBeUndefined();
  });

  it.each([
    [
      "another method",
      modern({ "mcp-method": "tools/list" }),
      call("get_weather"),
      /Mcp-Method header value "tools\/list" does not match body value "tools\/call"/,
    ],
    [
      "another tool",
      modern({ "mcp-method": "tools/call", "mcp-name": "get_weather" }),
      call("delete_all"),
      /Mcp-Name header value "get_weather" does not match body value "delete_all"/,
    ],
    [
      "another tool, Base64-encoded",
      modern({ "mcp-method": "tools/call", "mcp-name": `=?base64?${Buffer.from("read_docs").toString("base64")}?=` }),
      call("delete_all"),
      /Mcp-Name header value "read_docs" does not match/,
    ],
    ["a malformed sentinel", modern({ "mcp-method": "tools/call", "mcp-name": "=?base64?%%%?=" }), call("x"), /invalid =\?base64\?/],
    [
      "another resource",
      modern({ "mcp-method": "resources/read", "mcp-name": "file:///public.txt" }),
      { jsonrpc: "2.0", id: 3, method: "resources/read", params: { uri: "file:///etc/secret", _meta: meta } },
      /params\.uri/,
    ],
    [
      "another protocol version",
      modern({ "mcp-method": "tools/call", "mcp-protocol-version": "2026-01-01" }),
      call("x"),
      /MCP-Protocol-Version header value "2026-01-01"/,
    ],
    ["a batch", modern({ "mcp-method": "tools/call" }), [call("x"), call("y")], /batch/],
    ["a response", modern({ "mcp-method": "tools/call" }), { jsonrpc: "2.0", id: 1, result: {} }, /does not match body value "\(none\)"/],
    ["a method with different case", modern({ "mcp-method": "Tools/Call" }), call("x"), /Mcp-Method/],
  ])("refuses %s", (_what, headers, body, message) => {
    expect(headerMismatch(headers, body)).toMatch(message);
  });

  it("bounds what it echoes of the client's values", () => {
    const long = "x".repeat(5000);
    expect(headerMismatch(modern({ "mcp-method": long }), call("x"))!.length).toBeLessThan(300);
  });

  it("answers with the request's own id when it has one", () => {
    expect(requestId(call("x"))).toBe(1);
    expect(requestId({ id: "abc" })).toBe("abc");
    expect(requestId([call("x")])).toBeNull();
    expect(requestId({ id: { nested: true } })).toBeNull();
  });
});
