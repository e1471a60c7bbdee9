// What crosses the proxy: the request headers the MCP server may see (an allow-list, so nothing
// the client forges or the broker owns leaks through), the identity headers the broker adds, the
// response headers the client may see, and the upstream path.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { injectedHeaderValue, type ConnectionInject } from "../config/connections.ts";

/**
 * Client headers the MCP server needs; everything else (Authorization, Cookie, X-Auth-*, …) is
 * dropped. MCP 2026-07-28 mirrors body fields into Mcp-Method and Mcp-Name (required: its servers
 * refuse a request without them) and tool arguments into Mcp-Param-* (which intermediaries MUST
 * forward), and carries W3C trace context; Origin goes on so the MCP server can apply its own
 * rules after the broker's (origin-check.ts).
 */
const FORWARDED_REQUEST_HEADERS = new Set([
  "mcp-session-id",
  "mcp-protocol-version",
  "mcp-method",
  "mcp-name",
  "last-event-id",
  "accept",
  "content-type",
  "content-length",
  "user-agent",
  "origin",
  "traceparent",
  "tracestate",
  "baggage",
]);

/** Tool parameters mirrored into headers (`x-mcp-header`): forwarded whatever their name. */
const MCP_PARAM_PREFIX = "mcp-param-";

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

/** What the MCP server is told of the request's origin (X-Forwarded-For, -Proto, -Host). */
export interface ConnectionInfo {
  readonly ip: string;
  readonly protocol: string;
  readonly host: string;
}

/** The parts of a Koa context that say where a request came from (Koa.Context fits). */
export interface ForwardingContext {
  /** The real peer, or with app.proxy (TRUST_PROXY) the client named by the trusted proxy. */
  readonly ip: string;
  readonly protocol: string;
  readonly app: { readonly proxy: boolean };
  readonly req: { readonly socket: { readonly localAddress?: string | undefined; readonly localPort?: number | undefined } };
}

let lastPublic: { url: string; host: string; protocol: string } | undefined;

function publicOrigin(publicUrl: string): { host: string; protocol: string } {
  if (lastPublic?.url !== publicUrl) {
    const url = new URL(publicUrl);
    lastPublic = { url: publicUrl, host: url.host, protocol: url.protocol.slice(0, -1) };
  }
  return lastPublic;
}

/**
 * The origin the MCP server is told about. The host is the broker's configured identity
 * (PUBLIC_URL), never the client's Host or X-Forwarded-Host: the broker's public name is
 * configured, not asserted by clients (nor by a proxy in front). The scheme is PUBLIC_URL's too,
 * unless TRUST_PROXY lets the proxy in front say which one the client used. Without a PUBLIC_URL
 * (library use) the host is the address the broker was reached at on its own socket.
 */
export function forwardedConnection(ctx: ForwardingContext, publicUrl: string | undefined): ConnectionInfo {
  if (publicUrl) {
    const origin = publicOrigin(publicUrl);
    return { ip: ctx.ip, protocol: ctx.app.proxy ? ctx.protocol : origin.protocol, host: origin.host };
  }
  const { localAddress, localPort } = ctx.req.socket;
  const address = localAddress?.includes(":") ? `[${localAddress}]` : localAddress;
  return { ip: ctx.ip, protocol: ctx.protocol, host: address && localPort ? `${address}:${localPort}` : "" };
}

/** Printable ASCII and tabs: a header value as it may go. */
const PLAIN_HEADER_VALUE = /^[\t\x20-\x7e]*$/;

/**
 * A header value that cannot break the header block: control characters are removed and
 * non-ASCII text is sent as its UTF-8 bytes (HTTP header values are bytes; Node and undici
 * refuse characters above U+00FF).
 */
export function headerValue(value: string): string {
  // The usual value (an id, a login, a host) is printable ASCII already: tested, not copied.
  if (PLAIN_HEADER_VALUE.test(value)) return value;
  return Buffer.from(value.replace(/[\u0000-\u0008\u000a-\u001f\u007f]/g, ""), "utf8").toString("latin1");
}

export function upstreamRequestHeaders(
  incoming: IncomingHttpHeaders,
  identity: CallerIdentity,
  connection: ConnectionInfo,
  forwardUpstreamToken: boolean,
  /** The catalogue name of the server the request goes to (X-Auth-Server): one MCP server may sit behind several names. */
  serverName?: string,
  /** X-Auth-Assertion: the broker's signed statement of the same identity (grants/identity-assertion.ts). */
  assertion?: string,
): Record<string, string> {
  const headers: Record<string, string> = {};
  // One pass over what the client sent (Node's header names are lower case): a set lookup and a
  // prefix test per header, nothing allocated but the copy.
  for (const name in incoming) {
    const value = incoming[name];
    if (typeof value === "string" && (FORWARDED_REQUEST_HEADERS.has(name) || name.startsWith(MCP_PARAM_PREFIX))) headers[name] = value;
  }
  if (identity.subject !== null) headers["x-auth-subject"] = headerValue(identity.subject);
  if (identity.user !== null) headers["x-auth-user"] = headerValue(identity.user);
  headers["x-auth-client-id"] = headerValue(identity.clientId);
  headers["x-auth-scopes"] = headerValue(identity.scopes.join(" "));
  if (serverName !== undefined) headers["x-auth-server"] = serverName;
  if (assertion !== undefined) headers["x-auth-assertion"] = assertion;
  if (forwardUpstreamToken && identity.upstreamAccessToken) {
    headers["x-upstream-access-token"] = headerValue(identity.upstreamAccessToken);
  }
  if (connection.ip) headers["x-forwarded-for"] = connection.ip;
  headers["x-forwarded-proto"] = connection.protocol;
  if (connection.host) headers["x-forwarded-host"] = headerValue(connection.host);
  return headers;
}

/**
 * The user's own token for the server's connected account, in the header the configuration names
 * (set after what the client sent: a client cannot put its own value there).
 */
export function withConnectionToken(headers: Record<string, string>, inject: ConnectionInject, identity: CallerIdentity): void {
  if (inject.kind !== "header") return;
  delete headers[inject.header];
  const token = identity.connection?.token;
  if (token !== undefined) headers[inject.header] = headerValue(injectedHeaderValue(inject.format, token));
}

/**
 * The header names the upstream's Connection header lists (RFC 9110 §7.6.1), lower case; undefined
 * for the usual answer that lists none ("keep-alive", "close"), as found on every response.
 */
function connectionNamed(connection: string | string[] | undefined): Set<string> | undefined {
  if (connection === undefined || connection === "keep-alive" || connection === "close") return undefined;
  return new Set(
    String(connection)
      .split(",")
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

/**
 * The MCP server's response headers for the client: hop-by-hop headers (and those the upstream
 * named in Connection) belong to the upstream connection; Set-Cookie would plant cookies on the
 * broker's origin. CORS headers too: the broker's own CORS policy (http/cors.ts, which exposes
 * Mcp-Session-Id and WWW-Authenticate) is the one for its origin, not the MCP server's.
 */
export function clientResponseHeaders(upstream: IncomingHttpHeaders): OutgoingHttpHeaders {
  const named = connectionNamed(upstream.connection);
  const headers: OutgoingHttpHeaders = {};
  for (const name in upstream) {
    const value = upstream[name];
    if (value === undefined || HOP_BY_HOP.has(name) || named?.has(name) || name === "set-cookie" || name.startsWith("access-control-")) continue;
    headers[name] = value;
  }
  if (String(headers["content-type"] ?? "").startsWith("text/event-stream")) {
    // Tell any buffering reverse proxy in front of the broker (nginx) to pass events through.
    headers["x-accel-buffering"] = "no";
  }
  return headers;
}

/** Characters RFC 3986 lets a path segment carry unencoded (pchar minus "%"). */
const PCHAR = /^[A-Za-z0-9\-._~!$&'()*+,;=:@]$/;
const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** Control characters (C0, DEL, C1), raw or once decoded. */
const CONTROL = /\p{Cc}/u;
/** A segment some server reads as "." or "..": dots only (Windows also drops trailing dots and spaces). */
const DOT_LIKE = /^[.\s]*\.[.\s]*$/;

/** One percent-decoding step; null for malformed escapes or invalid UTF-8 (overlong `%c0%ae`, …). */
function decodeOnce(text: string): string | null {
  try {
    return decodeURIComponent(text);
  } catch {
    return null;
  }
}

/**
 * Whether one decoded form of a segment could move the path: a separator inside the segment, a
 * control character, or a dot segment, also with path parameters (`..;x`, Tomcat) or written with
 * compatibility characters (`．．`, full-width dots).
 */
function unsafeForm(form: string): boolean {
  if (/[/\\]/.test(form) || CONTROL.test(form) || /%(?:2f|5c|[01][0-9a-f]|7f)/i.test(form)) return true;
  const bare = form.split(";", 1)[0]!;
  return DOT_LIKE.test(bare) || DOT_LIKE.test(bare.normalize("NFKC"));
}

/**
 * A raw path segment in canonical form (RFC 3986 §6.2.2): escapes of unreserved characters
 * decoded, other escapes kept with upper-case hex (an escaped ";" or "?" is data, not syntax),
 * characters a segment may not carry raw (`"`, `{`, …) percent-encoded. Null when the segment is unsafe in
 * any of its decodings (double encoding included: `%252e%252e`) or not decodable at all.
 */
function canonicalSegment(raw: string): string | null {
  // Node's parser admits only printable ASCII in the request target; anything else came through a
  // lenient parser and has no one meaning (which bytes, which charset).
  if (/[^\x21-\x7e]/.test(raw)) return null;
  const decoded = decodeOnce(raw);
  if (decoded === null || unsafeForm(raw)) return null;
  // Decode again while it still changes: a server or framework behind the MCP server may.
  for (let form: string | null = decoded, i = 0; form !== null && i < 4; i++) {
    if (unsafeForm(form)) return null;
    const next: string | null = form.includes("%") ? decodeOnce(form) : null;
    form = next === form ? null : next;
  }
  let out = "";
  for (let i = 0; i < raw.length; ) {
    const c = raw[i]!;
    if (c === "%") {
      const char = String.fromCharCode(parseInt(raw.slice(i + 1, i + 3), 16));
      out += UNRESERVED.test(char) ? char : `%${raw.slice(i + 1, i + 3).toUpperCase()}`;
      i += 3;
      continue;
    }
    out += PCHAR.test(c) ? c : `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`;
    i += 1;
  }
  return out;
}

/**
 * The upstream path for a request under the mount path (`/mcp` → the target's path,
 * `/mcp/a/b?q` → target path + `/a/b?q`), its segments in canonical form and empty segments
 * dropped. `requestPath` is the raw request path (Koa's ctx.path is not percent-decoded). Null
 * when the request is not under the mount path or when any decoding of it could reach elsewhere
 * or mean something else to the MCP server: dot segments in any encoding (`..`, `%2e%2e`, `..;`,
 * `%252e`), encoded separators (`%2f`, `%5c`) or backslashes, control characters (raw or
 * encoded, `%00` included) and malformed escapes.
 */
export function upstreamPath(target: URL, mountPath: string, requestPath: string, querystring: string): string | null {
  if (requestPath !== mountPath && !requestPath.startsWith(`${mountPath}/`)) return null;
  const rest = requestPath.slice(mountPath.length);
  let normalized = "";
  const segments = rest.split("/").slice(1);
  for (const [i, raw] of segments.entries()) {
    if (raw === "") {
      // "//" collapses; a trailing "/" stays (it may matter to the MCP server's routes).
      if (i === segments.length - 1) normalized += "/";
      continue;
    }
    const segment = canonicalSegment(raw);
    if (segment === null) return null;
    normalized += `/${segment}`;
  }
  const base = normalized && target.pathname.endsWith("/") ? target.pathname.slice(0, -1) : target.pathname;
  const query = [target.search.slice(1), querystring].filter(Boolean).join("&");
  return `${base}${normalized}${query ? `?${query}` : ""}`;
}
