// CORS for the endpoints browser-based MCP clients (the MCP Inspector) call directly: metadata,
// registration, token, revocation and the MCP endpoint. No credentials: tokens travel in headers.
import type Koa from "koa";

/**
 * What a browser client may send: the MCP transport's headers, 2026-07-28's mirrored request
 * metadata and W3C trace context. Tool parameters mirrored into `Mcp-Param-{Name}` headers have
 * names of the server's choosing: a preflight asking for one is granted it (below).
 */
const ALLOWED_HEADERS =
  "Authorization, Content-Type, Accept, MCP-Protocol-Version, Context-Protocol-Version, Mcp-Session-Id, Last-Event-ID, Mcp-Method, Mcp-Name, traceparent, tracestate, baggage";
/** What its script may read of an answer. */
const EXPOSED_HEADERS = "WWW-Authenticate, Mcp-Session-Id, MCP-Protocol-Version, Mcp-Method, Mcp-Name, Retry-After, traceparent, tracestate, baggage";
const MCP_PARAM = /^mcp-param-[!#$%&'*+.^_`|~0-9a-z-]+$/;

/** The Mcp-Param-* names a preflight asks for, added to the fixed list. */
function allowedHeaders(requested: string): string {
  if (!requested.toLowerCase().includes("mcp-param-")) return ALLOWED_HEADERS;
  const params = requested
    .split(",")
    .map((h) => h.trim().toLowerCase())
    .filter((h) => MCP_PARAM.test(h));
  return params.length ? `${ALLOWED_HEADERS}, ${params.join(", ")}` : ALLOWED_HEADERS;
}

export interface CorsOptions {
  readonly methods: string;
  /**
   * The origins answers name (Access-Control-Allow-Origin: <origin>, Vary: Origin); a request from
   * another origin gets no CORS grant. Without it every origin is granted with `*`.
   */
  readonly allowOrigin?: (origin: string) => boolean;
}

export function cors(options: CorsOptions): Koa.Middleware {
  const { allowOrigin } = options;
  // Not async, and next() returned rather than awaited: no suspended frame per request.
  return (ctx, next) => {
    // ctx.res.setHeader, not ctx.set: see security-headers.ts (headers are not sent before next()).
    let granted = true;
    if (allowOrigin === undefined) ctx.res.setHeader("Access-Control-Allow-Origin", "*");
    else {
      // Vary is usually not set yet: set it outright; else merge (the vary package parses the value, about 1 KB per call).
      if (ctx.res.hasHeader("vary")) ctx.vary("Origin");
      else ctx.res.setHeader("Vary", "Origin");
      const origin = ctx.get("origin");
      granted = origin !== "" && allowOrigin(origin);
      if (granted) ctx.res.setHeader("Access-Control-Allow-Origin", origin);
    }
    // Read by a browser only along with a grant: a native client's answers (and the head an open
    // event stream keeps) go without it.
    if (granted) ctx.res.setHeader("Access-Control-Expose-Headers", EXPOSED_HEADERS);
    if (ctx.method === "OPTIONS") {
      ctx.set("Access-Control-Allow-Methods", options.methods);
      ctx.set("Access-Control-Allow-Headers", allowedHeaders(ctx.get("access-control-request-headers")));
      ctx.set("Access-Control-Max-Age", "600");
      ctx.status = 204;
      return undefined;
    }
    return next();
  };
}
