import { describe, expect, it } from "@jest/globals";
import { clientResponseHeaders, forwardedConnection, headerValue, upstreamPath, upstreamRequestHeaders } from "../../src/gateway/proxy-headers.ts";

const connection = { ip: "10.0.0.7", protocol: "https", host: "broker.example" };
const alice = {
  subject: "github:1",
  user: "alice",
  clientId: "c1",
  scopes: ["mcp", "read"],
  grantId: "g",
  facts: { subject: "github:1", login: "alice" },
  upstreamAccessToken: "gho_x",
};

describe("upstream request headers", () => {
  it("keeps only the allow-listed client headers and adds the identity", () => {
    // The client headers that reach the MCP server as they came.
    const allowed = {
      "mcp-session-id": "s",
      "mcp-protocol-version": "2025-11-25",
      "last-event-id": "7",
      accept: "text/event-stream",
      "content-type": "application/json",
      "content-length": "2",
      "user-agent": "ua",
    };
    const headers = upstreamRequestHeaders(
      {
        ...allowed,
        authorization: "Bearer t",
        cookie: "c=1",
        connection: "keep-alive",
        "transfer-encoding": "chunked",
        "x-auth-subject": "forged",
        "x-forwarded-for": "6.6.6.6",
        forwarded: "for=6.6.6.6",
        "x-upstream-access-token": "forged",
        "proxy-authorization": "Basic x",
        host: "broker.example",
        "x-custom": "1",
      },
      alice,
      connection,
      false,
    );
    expect(headers).toEqual({
      ...allowed,
      "x-auth-subject": "github:1",
      "x-auth-user": "alice",
      "x-auth-client-id": "c1",
      "x-auth-scopes": "mcp read",
      "x-forwarded-for": "10.0.0.7",
      "x-forwarded-proto": "https",
      "x-forwarded-host": "broker.example",
    });
  });

  // MCP 2026-07-28 (basic/transports/streamable-http, "Request Metadata"): Mcp-Method and Mcp-Name
  // are required of every request, intermediaries MUST forward Mcp-Param-* they do not recognise,
  // and trace context travels in traceparent/tracestate/baggage. Origin goes on to the MCP server.
  it("passes the MCP 2026-07-28 request metadata, trace context and Origin through unchanged", () => {
    const sent = {
      "mcp-protocol-version": "2026-07-28",
      "mcp-method": "tools/call",
      "mcp-name": "=?base64?SGVsbG8sIOS4lueVjA==?=",
      "mcp-param-region": "us-west1",
      "mcp-param-greeting": "=?base64?SGVsbG8sIOS4lueVjA==?=",
      traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
      tracestate: "congo=t61rcWkgMzE",
      baggage: "userId=alice,serverNode=DF%2028",
      origin: "http://localhost:6274",
    };
    const headers = upstreamRequestHeaders({ ...sent, authorization: "Bearer t" }, alice, connection, false);
    expect(headers).toMatchObject(sent);
    expect(headers).not.toHaveProperty("authorization");
  });

  it("adds the upstream token only when asked to and available", () => {
    expect(upstreamRequestHeaders({}, alice, connection, true)["x-upstream-access-token"]).toBe("gho_x");
    const { upstreamAccessToken: _, ...withoutToken } = alice;
    expect(upstreamRequestHeaders({}, withoutToken, connection, true)).not.toHaveProperty("x-upstream-access-token");
  });

  it("names the catalogue server the request is for, and never passes on the client's own X-Auth-Server", () => {
    expect(upstreamRequestHeaders({ "x-auth-server": "admin" }, alice, connection, false, "docs")["x-auth-server"]).toBe("docs");
    expect(upstreamRequestHeaders({ "x-auth-server": "admin" }, alice, connection, false)).not.toHaveProperty("x-auth-server");
  });

  it("omits subject and user for client_credentials callers", () => {
    const headers = upstreamRequestHeaders(
      {},
      { subject: null, user: null, clientId: "m", scopes: [], grantId: "g", facts: { subject: "client:m" } },
      connection,
      false,
    );
    expect(headers).not.toHaveProperty("x-auth-subject");
    expect(headers).not.toHaveProperty("x-auth-user");
    expect(headers["x-auth-client-id"]).toBe("m");
    expect(headers["x-auth-scopes"]).toBe("");
  });

  it("cannot be used to inject headers, and sends non-ASCII text as UTF-8 bytes", () => {
    expect(headerValue("alice\r\nX-Auth-Subject: root")).toBe("aliceX-Auth-Subject: root");
    const encoded = headerValue("zoë@example.com");
    expect(Buffer.from(encoded, "latin1").toString("utf8")).toBe("zoë@example.com");
  });
});

describe("client response headers", () => {
  it("drops hop-by-hop headers, those named in Connection, and Set-Cookie", () => {
    expect(
      clientResponseHeaders({
        "content-type": "text/event-stream",
        "mcp-session-id": "s",
        "set-cookie": ["a=1"],
        connection: "keep-alive, x-private",
        "x-private": "1",
        "keep-alive": "timeout=5",
        "transfer-encoding": "chunked",
        "x-other": "kept",
      }),
    ).toEqual({
      "content-type": "text/event-stream",
      "mcp-session-id": "s",
      "x-other": "kept",
      "x-accel-buffering": "no",
    });
  });

  it("drops the MCP server's CORS headers: the broker's CORS policy is the one for its origin", () => {
    expect(clientResponseHeaders({ "access-control-allow-origin": "https://evil.example", "access-control-expose-headers": "X-A", "x-b": "1" })).toEqual({
      "x-b": "1",
    });
  });
});

describe("upstream path", () => {
  const target = new URL("http://mcp.internal:8080/api/mcp");
  it("maps the mount path onto the target path and keeps the query", () => {
    expect(upstreamPath(target, "/mcp", "/mcp", "")).toBe("/api/mcp");
    expect(upstreamPath(target, "/mcp", "/mcp/sub/path", "a=1")).toBe("/api/mcp/sub/path?a=1");
    expect(upstreamPath(new URL("http://h/"), "/mcp", "/mcp", "")).toBe("/");
    expect(upstreamPath(new URL("http://h/"), "/mcp", "/mcp/x", "")).toBe("/x");
    expect(upstreamPath(new URL("http://h/base/"), "/mcp", "/mcp/x", "")).toBe("/base/x");
    expect(upstreamPath(new URL("http://h/mcp?key=k"), "/mcp", "/mcp", "a=1")).toBe("/mcp?key=k&a=1");
  });

  it("refuses paths outside the mount path or climbing out of the target path", () => {
    expect(upstreamPath(target, "/mcp", "/mcpx", "")).toBeNull();
    for (const p of ["/mcp/..", "/mcp/../x", "/mcp/./x", "/mcp/%2e%2e/x", "/mcp/.%2E/x", "/mcp/a\\b", "/mcp/a%5C..%5Cb"]) {
      expect([p, upstreamPath(target, "/mcp", p, "")]).toEqual([p, null]);
    }
  });

  // Koa's ctx.path is the raw request path: every encoding of a trick must be refused as such.
  it.each([
    ["encoded slash after dots", "/mcp/..%2fadmin"],
    ["encoded slash, upper case", "/mcp/..%2Fadmin"],
    ["encoded slash in a plain segment", "/mcp/a%2fb"],
    ["fully encoded dot-dot-slash", "/mcp/%2e%2e%2fadmin"],
    ["encoded dots as a segment", "/mcp/%2e%2e/admin"],
    ["mixed-case encoded dot", "/mcp/.%2E/admin"],
    ["single encoded dot", "/mcp/%2e/x"],
    ["double-encoded dots", "/mcp/%252e%252e/admin"],
    ["double-encoded slash", "/mcp/..%252fadmin"],
    ["triple-encoded dots", "/mcp/%25252e%25252e/admin"],
    ["path parameter on dot-dot (Tomcat)", "/mcp/..;/admin"],
    ["path parameter with a value on dot-dot", "/mcp/..;jsessionid=x/admin"],
    ["path parameter on dot", "/mcp/.;/x"],
    ["encoded semicolon on dot-dot", "/mcp/..%3b/admin"],
    ["encoded dots with a path parameter", "/mcp/%2e%2e;/admin"],
    ["trailing dot-dot", "/mcp/a/.."],
    ["three dots", "/mcp/.../admin"],
    ["dots and a trailing space (Windows)", "/mcp/..%20/admin"],
    ["full-width dots", "/mcp/%EF%BC%8E%EF%BC%8E/admin"],
    ["two-dot leader", "/mcp/%E2%80%A5/admin"],
    ["overlong UTF-8 dot", "/mcp/%c0%ae%c0%ae/admin"],
    ["encoded NUL", "/mcp/a%00b"],
    ["encoded NUL after dots", "/mcp/..%00/admin"],
    ["double-encoded NUL", "/mcp/a%2500b"],
    ["encoded newline", "/mcp/a%0d%0aX-Injected:%201"],
    ["encoded tab", "/mcp/a%09b"],
    ["encoded DEL", "/mcp/a%7fb"],
    ["encoded C1 control", "/mcp/a%c2%85b"],
    ["raw NUL", "/mcp/a\u0000b"],
    ["raw tab", "/mcp/a\tb"],
    ["raw non-ASCII", "/mcp/caf\u00e9"],
    ["raw backslash", "/mcp/..\\admin"],
    ["encoded backslash", "/mcp/..%5cadmin"],
    ["double-encoded backslash", "/mcp/..%255cadmin"],
    ["malformed escape", "/mcp/a%zzb"],
    ["truncated escape", "/mcp/a%2"],
    ["invalid UTF-8", "/mcp/%ff"],
    ["not under the mount path", "/mcp..%2fadmin"],
    ["encoded slash right after the mount path", "/mcp%2f..%2fadmin"],
  ])("refuses %s: %j", (_what, path) => {
    expect(upstreamPath(target, "/mcp", path, "")).toBeNull();
    expect(upstreamPath(new URL("http://h/"), "/mcp", path, "")).toBeNull();
  });

  it.each([
    ["/mcp/sub/path", "/api/mcp/sub/path"],
    ["/mcp/", "/api/mcp/"],
    ["/mcp//sub//path", "/api/mcp/sub/path"],
    ["/mcp/a%41b%7e%2D", "/api/mcp/aAb~-"],
    ["/mcp/a%3fb%3Bc%23d", "/api/mcp/a%3Fb%3Bc%23d"],
    ["/mcp/caf%c3%a9", "/api/mcp/caf%C3%A9"],
    ["/mcp/a{b}", "/api/mcp/a%7Bb%7D"],
    ["/mcp/a;v=1/b", "/api/mcp/a;v=1/b"],
    ["/mcp/.well-known/x", "/api/mcp/.well-known/x"],
    ["/mcp/a..b/..c", "/api/mcp/a..b/..c"],
    ["/mcp/100%25", "/api/mcp/100%25"],
  ])("forwards %s in canonical form as %s", (path, expected) => {
    expect(upstreamPath(target, "/mcp", path, "")).toBe(expected);
  });
});

describe("forwarded connection", () => {
  const request = (proxy: boolean, over: Partial<{ ip: string; protocol: string; localAddress: string; localPort: number }> = {}) => ({
    ip: over.ip ?? "10.0.0.7",
    protocol: over.protocol ?? "http",
    app: { proxy },
    req: { socket: { localAddress: over.localAddress ?? "127.0.0.1", localPort: over.localPort ?? 3000 } },
  });

  it("names PUBLIC_URL's host and scheme, whatever the client's Host said", () => {
    expect(forwardedConnection(request(false), "https://broker.example/base")).toEqual({ ip: "10.0.0.7", protocol: "https", host: "broker.example" });
    expect(forwardedConnection(request(false), "http://localhost:8080")).toEqual({ ip: "10.0.0.7", protocol: "http", host: "localhost:8080" });
  });

  it("with TRUST_PROXY the scheme and the client address come from the trusted proxy, the host still from PUBLIC_URL", () => {
    expect(forwardedConnection(request(true, { ip: "203.0.113.9", protocol: "https" }), "http://broker.example")).toEqual({
      ip: "203.0.113.9",
      protocol: "https",
      host: "broker.example",
    });
  });

  it("without PUBLIC_URL names the address the broker was reached at on its socket", () => {
    expect(forwardedConnection(request(false), undefined)).toEqual({ ip: "10.0.0.7", protocol: "http", host: "127.0.0.1:3000" });
    expect(forwardedConnection(request(false, { localAddress: "::1", localPort: 81 }), undefined).host).toBe("[::1]:81");
  });
});
