// CORS for the endpoints browser-based MCP clients (the MCP Inspector) call directly: metadata,
// registration, token, revocation and the MCP endpoint. No credentials: tokens travel in headers.
import type Koa from "koa";
import { carryOnEveryAnswer, type HeaderList } from "./answer-headers.ts";

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

/** Every origin granted: the same two headers on every answer. */
const ANY_ORIGIN: HeaderList = ["access-control-allow-origin", "*", "access-control-expose-headers", EXPOSED_HEADERS];
/** An answer that depends on the origin says so to caches, granted or not. */
const VARY_ORIGIN: HeaderList = ["vary", "Origin"];

export function cors(options: CorsOptions): Koa.Middleware {
  const { allowOrigin } = options;
  // Not async, and next() returned rather than awaited: no suspended frame per request.
  return (ctx, next) => {
    // Carried to the head (answer-headers.ts), written with it: the MCP server's own
    // Access-Control-* headers are dropped (proxy-headers.ts), and its Vary is merged with Origin.
    // Read by a browser only along with a grant: a native client's answers (and the head an open
    // event stream keeps) go without Expose-Headers.
    if (allowOrigin === undefined) carryOnEveryAnswer(ctx.res, ANY_ORIGIN);
    else {
      const origin = ctx.get("origin");
      const granted = origin !== "" && allowOrigin(origin);
      carryOnEveryAnswer(
        ctx.res,
        granted ? [...VARY_ORIGIN, "access-control-allow-origin", origin, "access-control-expose-headers", EXPOSED_HEADERS] : VARY_ORIGIN,
      );
    }
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
