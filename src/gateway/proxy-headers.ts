// What crosses the proxy: the request headers the MCP server may see (an allow-list, so nothing
// the client forges or the broker owns leaks through), the identity headers the broker adds, the
// response headers the client may see, and the upstream path.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { CallerIdentity } from "./identity.ts";

/** Client headers the MCP server needs; everything else (Authorization, Cookie, X-Auth-*, …) is dropped. */
const FORWARDED_REQUEST_HEADERS = [
  "mcp-session-id",
  "mcp-protocol-version",
  "last-event-id",
  "accept",
  "content-type",
  "content-length",
  "user-agent",
] as const;

/** RFC 9110 §7.6.1 hop-by-hop headers, plus the legacy Proxy-Connection. */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

/** The connection as the broker sees it (Koa's ctx.ip/protocol/host: only trusts proxies when TRUST_PROXY says so). */
export interface ConnectionInfo {
  readonly ip: string;
  readonly protocol: string;
  readonly host: string;
}

/**
 * A header value that cannot break the header block: control characters are removed and
 * non-ASCII text is sent as its UTF-8 bytes (HTTP header values are bytes; Node and undici
 * refuse characters above U+00FF).
 */
export function headerValue(value: string): string {
  return Buffer.from(value.replace(/[\u0000-\u0008\u000a-\u001f\u007f]/g, ""), "utf8").toString("latin1");
}

export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  identity: CallerIdentity,
  connection: ConnectionInfo,
  forwardUpstreamToken: boolean,
): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const name of FORWARDED_REQUEST_HEADERS) {
    const value = incoming[name];
    if (typeof value === "string") headers[name] = value;
  }
  if (identity.subject !== null) headers["x-auth-subject"] = headerValue(identity.subject);
  if (identity.user !== null) headers["x-auth-user"] = headerValue(identity.user);
  headers["x-auth-client-id"] = headerValue(identity.clientId);
  headers["x-auth-scopes"] = headerValue(identity.scopes.join(" "));
  if (forwardUpstreamToken && identity.upstreamAccessToken) {
    headers["x-upstream-access-token"] = headerValue(identity.upstreamAccessToken);
  }
  if (connection.ip) headers["x-forwarded-for"] = connection.ip;
  headers["x-forwarded-proto"] = connection.protocol;
  if (connection.host) headers["x-forwarded-host"] = headerValue(connection.host);
  return headers;
}

/**
 * The MCP server's response headers for the client: hop-by-hop headers (and those the upstream
 * named in Connection) belong to the upstream connection; Set-Cookie would plant cookies on the
 * broker's origin. CORS headers too: the broker's own CORS policy (http/cors.ts, which exposes
 * Mcp-Session-Id and WWW-Authenticate) is the one for its origin, not the MCP server's.
 */
export function clientResponseHeaders(upstream: IncomingHttpHeaders): OutgoingHttpHeaders {
  const connectionTokens = new Set(
    String(upstream.connection ?? "")
      .split(",")
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
  const headers: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(upstream)) {
    if (value === undefined || HOP_BY_HOP.has(name) || connectionTokens.has(name) || name === "set-cookie" || name.startsWith("access-control-")) continue;
    headers[name] = value;
  }
  if (String(headers["content-type"] ?? "").startsWith("text/event-stream")) {
    // Tell any buffering reverse proxy in front of the broker (nginx) to pass events through.
    headers["x-accel-buffering"] = "no";
  }
  return headers;
}

const DOT_SEGMENT = /^(?:\.|%2e){1,2}$/i;

/**
 * The upstream path for a request under the mount path (`/mcp` → the target's path,
 * `/mcp/a/b?q` → target path + `/a/b?q`). Null when the request path could climb out of the
 * target's path (dot segments, backslashes) or is not under the mount path.
 */
export function upstreamPath(target: URL, mountPath: string, requestPath: string, querystring: string): string | null {
  if (requestPath !== mountPath && !requestPath.startsWith(`${mountPath}/`)) return null;
  const rest = requestPath.slice(mountPath.length);
  if (/\\|%5c/i.test(rest) || rest.split("/").some((segment) => DOT_SEGMENT.test(segment))) return null;
  const base = rest && target.pathname.endsWith("/") ? target.pathname.slice(0, -1) : target.pathname;
  const query = [target.search.slice(1), querystring].filter(Boolean).join("&");
  return `${base}${rest}${query ? `?${query}` : ""}`;
}
