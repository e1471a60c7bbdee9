// The streaming reverse proxy from PUBLIC_URL/mcp to the protected MCP server. Request bodies go
// up whole when small, else streamed (request-body.ts); responses (JSON or SSE) go down chunk by
// chunk with backpressure: each SSE event reaches the client when the MCP server emits it.
//
// Koa 3 choice: the response is written to ctx.res directly (ctx.respond = false) so headers are
// flushed the moment the MCP server sends them (an SSE GET stream may stay silent for minutes).
// An answer to a POST is relayed before the middleware resolves; the GET stream goes on after it
// (no middleware frame is kept for hours), and what is written at the end (the access line,
// metrics, the request span) waits for the response's close. The route must not have a body parser: the
// raw request is forwarded (request-body.ts).
// What every MCP request passes first (method, session owner, header/body agreement, tool rules)
// is the front end's (front-end.ts); this file relays.
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import type { Readable } from "node:stream";
import type Koa from "koa";
import { Pool, errors as undiciErrors } from "undici";
import type { Logger } from "../logger.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import type { McpHandler } from "./router.ts";
import { clientResponseHeaders, forwardedConnection, upstreamPath, upstreamRequestHeaders, withConnectionToken } from "./proxy-headers.ts";
import type { ConnectionInject } from "../config/connections.ts";
import { sessionOwnerKey, type McpSessionBinding } from "./session-binding.ts";
import { pump } from "./pump.ts";
import { jsonRpcError } from "./json-rpc-error.ts";
import type { RequestCalls } from "./tool-calls.ts";
import { mcpFrontEnd, refuseForeignSession, requestLogger, type FrontEndOptions, type McpBackend, type McpRequest } from "./front-end.ts";
import { BodyTooLarge, isStreamed, upstreamBody, type UpstreamBody } from "./request-body.ts";
import type { McpServerAnswer } from "../outbound/mcp-server-answer.ts";
import type { OpenStream, OpenStreams } from "./open-streams.ts";
import { admitReceiving, retryAfterSeconds, slowClientLimits, TOO_MANY_BODIES } from "../http/slow-requests.ts";
import { endProxySpan, proxyAnswered, startProxySpan, withProxyTraceContext, type ProxySpan } from "./proxy-span.ts";
import { OAuthError } from "../http/errors.ts";
import { backendRefusal, type BrokerChallenge } from "./scope-challenge.ts";
import { ExchangeAbort } from "./exchange-abort.ts";
import { ClientGone, requestDeadline, ShuttingDown, SlowUpload, UpstreamTimeout, type RequestDeadline } from "./upstream-deadline.ts";
import { DirectRelay } from "./direct-relay.ts";
import { writeHeadWith } from "../http/answer-headers.ts";

export interface McpProxyOptions extends FrontEndOptions {
  /** The MCP server's endpoint URL (MCP_SERVER_URL). */
  readonly targetUrl: string;
  /** How long the MCP server may take to send response headers (not the body: streams are long-lived). */
  readonly timeoutMs: number;
  /** FORWARD_UPSTREAM_TOKEN: send the identity's upstream access token as X-Upstream-Access-Token. */
  readonly forwardUpstreamToken: boolean;
  /** The catalogue name of the server (sent as X-Auth-Server). */
  readonly serverName?: string;
  readonly sessionBinding: McpSessionBinding;
  /** The broker paths the proxy is mounted on. Default `/mcp`. */
  readonly mountPaths?: readonly string[];
  /**
   * PUBLIC_URL: its host is the X-Forwarded-Host the MCP server receives (never the client's
   * Host), its scheme the X-Forwarded-Proto unless the app trusts a proxy in front. Without it,
   * the address the request reached the broker at.
   */
  readonly publicUrl?: string;
  /**
   * How the broker answers the MCP server's 401 and `403 insufficient_scope` with its own challenge
   * (the scopes it can grant: SCOPES_SUPPORTED with mcp and offline_access). Without it (the proxy
   * used on its own) those answers pass, minus the MCP server's WWW-Authenticate.
   */
  readonly challenge?: BrokerChallenge;
  /** Told how long the MCP server took to answer, and why a request to it failed (metrics). */
  readonly observer?: ProxyObserver;
  /** Told of every answer of the MCP server (mcp-server-misfits.ts warns about the ones that make no sense). */
  readonly answered?: (answer: McpServerAnswer) => void;
  /** The event streams being relayed, which a shutdown ends properly (open-streams.ts). */
  readonly streams?: OpenStreams;
  /** The signed word on who the caller is (X-Auth-Assertion), made for this server. */
  readonly assertion?: (identity: CallerIdentity) => string | Promise<string>;
  /** How the user's connected-account token reaches the server (a header), when it needs one. */
  readonly connectionInject?: ConnectionInject | undefined;
}

export interface ProxyObserver {
  mcpServerAnswered(seconds: number): void;
  proxyFailed(reason: "unreachable" | "timeout" | "client_gone"): void;
}

export interface McpProxy {
  /** Forwards the request of an authenticated caller; resolves when the answer has ended, or the GET stream has started. */
  middleware: McpHandler;
  /** Cuts in-flight requests (open SSE streams included) and closes the upstream connections. */
  close(): Promise<void>;
}

const UNREACHABLE_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

/**
 * Drops a response body nobody will read. undici's body emits "error" (RequestAbortedError) when
 * destroyed; without a listener that error would end the process.
 */
function discard(body: Readable): void {
  body.on("error", () => {});
  body.destroy();
}

function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  return typeof code === "string" ? code : undefined;
}

/** The parts of one proxy every request uses. */
interface ProxyParts {
  readonly options: McpProxyOptions;
  readonly target: URL;
  /** Connections for requests that end within the call (POST, DELETE). */
  readonly pool: Pool;
  /**
   * Connections for the standalone GET streams, which hold theirs for as long as the client stays
   * connected. Apart because undici's Pool looks for a free connection by walking all of its own:
   * with 5,000 GET streams open in one pool, every POST walked 5,000 busy connections first (bench
   * row (s)).
   */
  readonly streamPool: Pool;
  readonly inFlight: Set<ExchangeAbort>;
}

/** One forwarded request: what its steps share. */
interface Exchange {
  readonly ctx: Koa.Context;
  readonly request: McpRequest;
  /** The request's path at the MCP server. */
  readonly path: string;
  /** Cuts the request to the MCP server, and says why it was cut. */
  readonly cut: ExchangeAbort;
  readonly deadline: RequestDeadline;
  /** The client address's place for a body still arriving (http/slow-requests.ts). */
  readonly release: (() => void) | undefined;
  readonly onClose: () => void;
  span?: ProxySpan;
  /** When the request went to the MCP server (performance.now()): how long it took to answer. */
  asked?: number;
}

type Upstream = Awaited<ReturnType<Pool["request"]>>;

/** What answer() tells relay(): the exchange ended, or its event stream goes on (its relay's end closes the exchange). */
type Answered = "ended" | "streaming";

/** What went up: the MCP server's answer, the body when read whole, this request's tools/list answers to filter. */
interface Sent {
  readonly upstream: Upstream;
  readonly body: Buffer | null;
  readonly listed: RequestCalls | undefined;
}

/** Answers a failed upstream request, unless nobody is listening any more. */
function failed({ options, target }: ProxyParts, ctx: Koa.Context, log: Logger, reason: unknown, err: unknown): void {
  if (reason instanceof ClientGone || ctx.req.socket.destroyed) {
    log.debug("client went away before the MCP server answered");
    options.observer?.proxyFailed("client_gone");
    return;
  }
  // The rest of the body is not wanted after a slow or too large upload: the connection closes after this answer.
  if (reason instanceof SlowUpload || err instanceof BodyTooLarge) {
    if (reason instanceof SlowUpload) log.info({ err: reason.message }, "client upload too slow");
    ctx.set("Connection", "close");
    jsonRpcError(ctx, reason instanceof SlowUpload ? 408 : 413, -32000, (reason instanceof SlowUpload ? reason : (err as Error)).message);
    return;
  }
  if (reason instanceof ShuttingDown) {
    jsonRpcError(ctx, 503, -32603, "The broker is shutting down; please retry.");
    return;
  }
  if (reason instanceof UpstreamTimeout || err instanceof undiciErrors.ConnectTimeoutError) {
    log.warn({ target: target.origin, timeoutMs: options.timeoutMs }, "MCP server timed out");
    options.observer?.proxyFailed("timeout");
    jsonRpcError(ctx, 504, -32603, `The MCP server did not respond within ${options.timeoutMs} ms.`);
    return;
  }
  const code = errorCode(err);
  log.warn({ target: target.origin, code, err: (err as Error)?.message }, "MCP server request failed");
  options.observer?.proxyFailed("unreachable");
  const unreachable = code !== undefined && UNREACHABLE_CODES.has(code);
  jsonRpcError(ctx, 502, -32603, unreachable ? "The MCP server is unreachable." : "The connection to the MCP server failed before it answered.");
}

/**
 * A body still arriving takes one of the client address's places until it has arrived; an
 * address with none left is refused at once (http/slow-requests.ts): "refused" once answered.
 */
function admitUpload(ctx: Koa.Context): (() => void) | undefined | "refused" {
  if (ctx.method !== "POST" || ctx.req.complete) return undefined;
  const release = admitReceiving(ctx);
  if (release !== undefined) return release;
  ctx.set("Retry-After", String(retryAfterSeconds(ctx.app)));
  ctx.set("Connection", "close");
  jsonRpcError(ctx, 429, -32000, TOO_MANY_BODIES);
  return "refused";
}

function openExchange({ options, inFlight }: ProxyParts, ctx: Koa.Context, request: McpRequest, path: string, release: (() => void) | undefined): Exchange {
  const cut = new ExchangeAbort();
  inFlight.add(cut);
  const deadline = requestDeadline(options.timeoutMs, ctx.req, release && slowClientLimits(ctx.app), (reason) => cut.abort(reason));
  const onClose = () => {
    if (!ctx.res.writableFinished) cut.abort(new ClientGone());
  };
  // `on`: "close" comes once, and a `once` wrapper is kept for as long as an event stream is open.
  ctx.res.on("close", onClose);
  return { ctx, request, path, cut, deadline, release, onClose };
}

function closeExchange({ inFlight }: ProxyParts, x: Exchange): void {
  x.deadline.disarm();
  endExchange(inFlight, x.span, x.release, x.ctx.res, x.onClose, x.cut);
}

/** What ending an exchange undoes (its parts as arguments: streamEnd keeps them without the exchange). */
function endExchange(
  inFlight: Set<ExchangeAbort>,
  span: ProxySpan | undefined,
  release: (() => void) | undefined,
  res: Koa.Context["res"],
  onClose: () => void,
  cut: ExchangeAbort,
): void {
  endProxySpan(span);
  release?.();
  res.off("close", onClose);
  inFlight.delete(cut);
}

/** The body to send, read and checked by the front end when read whole; undefined when the front end answered. */
async function screenedBody(x: Exchange): Promise<{ body: UpstreamBody; listed: RequestCalls | undefined } | undefined> {
  const body = await upstreamBody(x.ctx.req, x.cut, x.request.readWhole);
  if (x.release !== undefined) {
    if (isStreamed(body)) {
      x.deadline.streaming();
      x.ctx.req.once("end", x.release);
    } else x.release();
  }
  if (!Buffer.isBuffer(body)) return { body, listed: undefined };
  const screened = x.request.screen(body);
  return screened && { body, listed: screened.listed };
}

/** Sends the request up; undefined when it was answered here (the front end's refusal, a failure). */
async function send(parts: ProxyParts, x: Exchange): Promise<Sent | undefined> {
  const { options, target } = parts;
  const { ctx, request } = x;
  const pool = ctx.method === "GET" ? parts.streamPool : parts.pool;
  // Before the try: a failure to sign is the broker's own (its store), not the MCP server's.
  // Awaited only when it is a promise (a new assertion to sign): the reused one is a plain string.
  let assertion = options.assertion?.(request.identity);
  if (typeof assertion === "object") assertion = await assertion;
  try {
    const screened = await screenedBody(x);
    if (!screened) return undefined;
    x.asked = performance.now();
    x.span = startProxySpan(target, ctx.method, x.path);
    const headers = upstreamRequestHeaders(
      ctx.req.headers,
      request.identity,
      forwardedConnection(ctx, options.publicUrl),
      options.forwardUpstreamToken,
      options.serverName,
      assertion,
    );
    if (options.connectionInject) withConnectionToken(headers, options.connectionInject, request.identity);
    // A call in a session whose answer needs no filter is relayed as it comes (direct-relay.ts):
    // nothing about it waits between the answer's head and its body (the session is bound already).
    if (ctx.method === "POST" && request.sessionId !== undefined && screened.listed === undefined) {
      await relayDirect(parts, x, withProxyTraceContext(x.span, headers), screened.body as Buffer | Readable | null);
      return undefined;
    }
    const upstream = await pool.request({
      method: ctx.method as "GET" | "POST" | "DELETE",
      path: x.path,
      headers: withProxyTraceContext(x.span, headers),
      // undici documents AsyncIterable bodies (Dispatcher.md); its type declarations lag.
      body: screened.body as Buffer | Readable | null,
      signal: x.cut,
    });
    return { upstream, body: Buffer.isBuffer(screened.body) ? screened.body : null, listed: screened.listed };
  } catch (err) {
    // The broker's own answer (the tool rules' step-up challenge), not a failure of the MCP server.
    if (err instanceof OAuthError) throw err;
    endProxySpan(x.span, x.cut.reason ?? err);
    failed(parts, ctx, request.log(), x.cut.reason, err);
    return undefined;
  } finally {
    x.deadline.disarm();
  }
}

/**
 * The MCP server's status and headers have come: told to whoever listens (metrics with how long
 * it took, the misfit warnings, the span). Returns the broker's own refusal of a 401 or 403 insufficient_scope
 * (scope-challenge.ts), which replaces the MCP server's answer; null for any other.
 */
function heard({ options }: ProxyParts, x: Exchange, status: number, headers: IncomingHttpHeaders): OAuthError | null {
  const { ctx, request } = x;
  if (x.asked !== undefined) options.observer?.mcpServerAnswered((performance.now() - x.asked) / 1000);
  options.answered?.({
    status,
    method: ctx.method,
    contentType: headers["content-type"],
    wwwAuthenticate: headers["www-authenticate"],
    sessionSent: request.sessionId !== undefined,
    tokenSent: options.forwardUpstreamToken,
  });
  proxyAnswered(x.span, status);
  return status === 401 || status === 403 ? backendRefusal(status, headers["www-authenticate"], request.identity, options.challenge, request.log) : null;
}

/** The MCP server's headers as the client gets them: only the broker challenges its clients (heard). */
function relayedHeaders(upstream: IncomingHttpHeaders): OutgoingHttpHeaders {
  const headers = clientResponseHeaders(upstream);
  delete headers["www-authenticate"];
  return headers;
}

const isEventStream = (contentType: string | undefined): boolean => /^text\/event-stream/i.test(contentType ?? "");

/**
 * Relays the answer to a POST straight from undici's dispatch callbacks (direct-relay.ts). Resolves
 * when the answer has been relayed, or has failed after its head was written (then logged); rejects
 * with a failure before the head, or with the broker's refusal of the answer, as send() handles both.
 */
function relayDirect(parts: ProxyParts, x: Exchange, headers: Record<string, string>, body: Buffer | Readable | null): Promise<void> {
  const { options } = parts;
  const { ctx, request } = x;
  const streams = options.streams;
  let streamed: OpenStream | undefined;
  return new Promise((resolve, reject) => {
    const head = (status: number, upstreamHeaders: IncomingHttpHeaders): Error | undefined => {
      x.deadline.disarm();
      const refusal = heard(parts, x, status, upstreamHeaders);
      if (refusal) return refusal;
      ctx.respond = false;
      writeHeadWith(ctx.res, status, relayedHeaders(upstreamHeaders));
      if (streams && isEventStream(upstreamHeaders["content-type"])) streamed = streams.opened(ctx.res, relay, Buffer.isBuffer(body) ? body : Buffer.alloc(0));
      return undefined;
    };
    const relay = new DirectRelay(ctx.res, x.cut, head, (err, headWritten) => {
      if (streamed) streams?.closed(streamed);
      if (!err) return resolve();
      if (!headWritten) return reject(err);
      abnormalEnd(err, x.cut, request.log());
      resolve();
    });
    // undici calls the handler's callbacks (Dispatcher.DispatchHandler) and reads the body as request() would.
    parts.pool.dispatch({ method: "POST", path: x.path, headers, body }, relay);
  });
}

/**
 * After a 2xx: a DELETE ends the session's binding; an answer to a request without a session may
 * issue one (initialize), bound now to the caller, before the client can learn the id from this
 * answer. False when another caller claimed that id first.
 */
async function bindSession({ options }: ProxyParts, x: Exchange, upstream: Upstream): Promise<boolean> {
  const { sessionId, identity } = x.request;
  if (x.ctx.method === "DELETE" && sessionId !== undefined) {
    await options.sessionBinding.release(sessionId);
    return true;
  }
  if (sessionId !== undefined) return true;
  const issued = upstream.headers["mcp-session-id"];
  const owner = sessionOwnerKey(identity);
  return typeof issued !== "string" || (await options.sessionBinding.claim(issued, owner)) === owner;
}

/**
 * The MCP server's answer: refused by the broker (its challenge, another's session), or streamed
 * to the client. Resolves with "streaming" for an event stream still being relayed, whose end
 * closes the exchange (see streamAnswer).
 */
async function answer(parts: ProxyParts, x: Exchange, sent: Sent): Promise<Answered> {
  const { ctx, request } = x;
  const { upstream } = sent;
  const status = upstream.statusCode;
  const refusal = heard(parts, x, status, upstream.headers);
  if (refusal) {
    discard(upstream.body);
    throw refusal;
  }
  if (status >= 200 && status < 300) {
    // The binding's store may fail (database down): the MCP server's answer then goes nowhere.
    const bound = await bindSession(parts, x, upstream).catch((err: unknown) => {
      discard(upstream.body);
      throw err;
    });
    if (!bound) {
      discard(upstream.body);
      refuseForeignSession(ctx, request.identity, request.log(), "MCP session claimed by another caller first");
      return "ended";
    }
  }
  return streamAnswer(parts, x, sent);
}

/**
 * Writes the MCP server's answer to the client as it comes (its tools/list answers filtered for the
 * caller). The GET stream of server messages may stay open for hours: it is not awaited, so the
 * middleware above return and keep nothing of theirs while it runs (the access line and the
 * metrics wait for the response's close; measured in bench row (s)), and its end closes the
 * exchange. Any other answer is relayed before this resolves.
 */
async function streamAnswer(parts: ProxyParts, x: Exchange, { upstream, body, listed }: Sent): Promise<Answered> {
  const { options } = parts;
  const { ctx, request } = x;
  ctx.respond = false;
  let headers = relayedHeaders(upstream.headers);
  const answerHeaders = {
    contentType: upstream.headers["content-type"] as string | undefined,
    contentEncoding: upstream.headers["content-encoding"] as string | undefined,
  };
  const filter = request.listFilter(answerHeaders, ctx.method === "GET" ? "get-stream" : listed);
  if (filter) headers = filter.responseHeaders(headers) as typeof headers;
  // In a session, the headers go to writeHead as one object (Node keeps no map of them for an
  // event stream that stays open: bench row (s)). Without one (initialize), they are set on the
  // response, where the access line reads the session the MCP server has just issued.
  if (request.sessionId !== undefined) writeHeadWith(ctx.res, upstream.statusCode, headers);
  else ctx.res.writeHead(upstream.statusCode, headers);
  // The headers go out now when no body has come yet (a long tool call, an idle event stream: the
  // client learns the answer began, as it would from the MCP server); otherwise with the first
  // chunk, one write instead of two.
  if (upstream.body.readableLength === 0) ctx.res.flushHeaders();
  const streams = options.streams;
  const streamed =
    streams && isEventStream(answerHeaders.contentType)
      ? streams.opened(ctx.res, upstream.body, ctx.method === "POST" ? (body ?? Buffer.alloc(0)) : null)
      : undefined;
  const source = filter ? upstream.body.pipe(filter) : upstream.body;
  // Only the GET stream: a POST's event stream usually ends within the call, and letting it outlive
  // the middleware cost every such call close listeners instead of direct writes (+8% broker CPU
  // per cached tools/call in bench row (t)'s paired rounds).
  if (streams && streamed && ctx.method === "GET") {
    pump(source, ctx.res, streamEnd(parts, x, streams, streamed));
    return "streaming";
  }
  await new Promise<void>((resolve) =>
    pump(source, ctx.res, (err) => {
      if (streamed) streams?.closed(streamed);
      if (err) abnormalEnd(err, x.cut, request.log());
      resolve();
    }),
  );
  return "ended";
}

/** Logs a relay that failed, unless the client went away (nothing abnormal in that). */
function abnormalEnd(err: Error, cut: ExchangeAbort, log: Logger): void {
  if (!(cut.reason instanceof ClientGone)) log.info({ code: errorCode(err), err: err.message }, "MCP response stream ended abnormally");
}

/**
 * The end of an event stream still being relayed after the middleware returned (pump's callback):
 * the stream leaves the open ones, an abnormal end is logged, and the exchange is closed. One
 * closure, made apart from streamAnswer, keeping only what those need: not the request (the front
 * end's closures, its logger's among them) nor the deadline (already disarmed: a GET has no
 * upload), which a GET stream would keep for hours (bench row (s)).
 */
function streamEnd({ inFlight, options }: ProxyParts, x: Exchange, streams: OpenStreams, streamed: OpenStream): (err?: Error) => void {
  const { ctx, span, release, cut, onClose } = x;
  const res = ctx.res;
  return (err) => {
    streams.closed(streamed);
    if (err) abnormalEnd(err, cut, requestLogger(ctx, options.logger));
    endExchange(inFlight, span, release, res, onClose, cut);
  };
}

/** The HTTP backend: relays a request the front end let through to the MCP server, and its answer back. */
function httpBackend(parts: ProxyParts, mountPaths: readonly string[]): McpBackend {
  return {
    sessionOwner: (sessionId) => parts.options.sessionBinding.ownerOf(sessionId),
    async relay(ctx, request) {
      const mount = mountPaths.find((m) => ctx.path === m || ctx.path.startsWith(`${m}/`)) ?? mountPaths[0]!;
      const path = upstreamPath(parts.target, mount, ctx.path, ctx.querystring);
      if (path === null) return jsonRpcError(ctx, 400, -32000, "The request path is not valid for the MCP endpoint.");
      if (ctx.req.readableDidRead) throw new Error("The /mcp request body was already read: the MCP route must not have a body parser.");
      const release = admitUpload(ctx);
      if (release === "refused") return;
      const x = openExchange(parts, ctx, request, path, release);
      let answered: Answered = "ended";
      try {
        const sent = await send(parts, x);
        if (sent) answered = await answer(parts, x, sent);
      } finally {
        if (answered === "ended") closeExchange(parts, x);
      }
    },
  };
}

export function createMcpProxy(options: McpProxyOptions): McpProxy {
  const target = new URL(options.targetUrl);
  // Longest first, so /broker/mcp is not read as a path under /mcp's neighbour.
  const mountPaths = [...(options.mountPaths ?? ["/mcp"])].sort((a, b) => b.length - a.length);
  // Our own deadline (upstream-deadline.ts) replaces undici's header/body timeouts: SSE bodies
  // never time out, and a slow but progressing upload is not cut.
  const poolOptions = { connect: { timeout: options.timeoutMs }, headersTimeout: 0, bodyTimeout: 0 };
  const pool = new Pool(target.origin, poolOptions);
  const streamPool = new Pool(target.origin, poolOptions);
  const inFlight = new Set<ExchangeAbort>();
  return {
    middleware: mcpFrontEnd(httpBackend({ options, target, pool, streamPool, inFlight }, mountPaths), options),
    async close() {
      for (const cut of inFlight) cut.abort(new ShuttingDown());
      await Promise.all([pool.destroy(), streamPool.destroy()]);
    },
  };
}
