// The streaming reverse proxy from PUBLIC_URL/mcp to the protected MCP server. Request bodies go
// up whole when small, else streamed (request-body.ts); responses (JSON or SSE) go down chunk by
// chunk with backpressure: each SSE event reaches the client when the MCP server emits it.
//
// Koa 3 choice: the response is written to ctx.res directly (ctx.respond = false) so headers are
// flushed the moment the MCP server sends them (an SSE GET stream may stay silent for minutes)
// and the middleware resolves only when the stream ends, so the request log sees the real status
// and duration. The route must not have a body parser: the raw request is forwarded (request-body.ts).
import type { IncomingHttpHeaders, IncomingMessage } from "node:http";
import type { Readable } from "node:stream";
import type Koa from "koa";
import { Pool, errors as undiciErrors } from "undici";
import type { Logger } from "../logger.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { challenge, parseBearerChallenge, type ChallengeOptions } from "./bearer.ts";
import { OAuthError } from "../http/errors.ts";
import { scopeList } from "../grants/scope.ts";
import { clientResponseHeaders, forwardedConnection, upstreamPath, upstreamRequestHeaders } from "./proxy-headers.ts";
import { sessionOwnerKey, type McpSessionBinding } from "./session-binding.ts";
import { pump } from "./pump.ts";
import { jsonRpcError } from "./json-rpc-error.ts";
import type { ToolPolicy } from "../grants/tool-policy.ts";
import { callsIn, decideCalls, errorResponse, parseRequestBody, TOOL_NOT_PERMITTED, type RefusedCall, type RequestCalls } from "./tool-calls.ts";
import { ToolListFilter, type ListAnswers } from "./tool-list-filter.ts";
import { refusedMethod, refuseForeignSession, sessionNotFound } from "./front-end.ts";
import { BodyTooLarge, isStreamed, upstreamBody } from "./request-body.ts";
import { HEADER_MISMATCH, headerMismatch, mirrorsBody, requestId } from "./header-consistency.ts";
import { rpcMethods } from "./rpc-methods.ts";
import type { McpServerAnswer } from "../outbound/mcp-server-answer.ts";
import type { OpenStreams } from "./open-streams.ts";
import { admitReceiving, retryAfterSeconds, slowClientLimits, TOO_MANY_BODIES, type SlowClientLimits } from "../http/slow-requests.ts";
import { endProxySpan, proxyAnswered, startProxySpan, withProxyTraceContext, type ProxySpan } from "./proxy-span.ts";

export interface McpProxyOptions {
  /** The MCP server's endpoint URL (MCP_SERVER_URL). */
  readonly targetUrl: string;
  /** How long the MCP server may take to send response headers (not the body: streams are long-lived). */
  readonly timeoutMs: number;
  /** FORWARD_UPSTREAM_TOKEN: send the identity's upstream access token as X-Upstream-Access-Token. */
  readonly forwardUpstreamToken: boolean;
  /** The catalogue name of the server (sent as X-Auth-Server). */
  readonly serverName?: string;
  readonly logger: Logger;
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
  readonly challenge?: ChallengeOptions & { readonly knownScopes: readonly string[] };
  /** Told how long the MCP server took to answer, and why a request to it failed (metrics). */
  readonly observer?: ProxyObserver;
  /** Told of every answer of the MCP server (mcp-server-misfits.ts warns about the ones that make no sense). */
  readonly answered?: (answer: McpServerAnswer) => void;
  /** The event streams being relayed, which a shutdown ends properly (open-streams.ts). */
  readonly streams?: OpenStreams;
  /** The server's tool rules (grants/tool-policy.ts): calls decided before they leave, lists filtered on their way back. */
  readonly toolPolicy?: ToolPolicy;
  /** Told of each call the tool rules refused (the audit trail). */
  readonly toolDenied?: (refused: RefusedCall, identity: CallerIdentity) => void;
}

export interface ProxyObserver {
  mcpServerAnswered(seconds: number): void;
  proxyFailed(reason: "unreachable" | "timeout" | "client_gone"): void;
}

export interface McpProxy {
  /** Forwards the request of an authenticated caller; resolves when the response has ended. */
  middleware(ctx: Koa.Context, identity: CallerIdentity): Promise<void>;
  /** Cuts in-flight requests (open SSE streams included) and closes the upstream connections. */
  close(): Promise<void>;
}

const UNREACHABLE_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EHOSTUNREACH", "ENETUNREACH", "EAI_AGAIN"]);

/** Abort reasons: why the upstream request was cut. */
class UpstreamTimeout extends Error {}
class ClientGone extends Error {}
class ShuttingDown extends Error {}
/** The client's upload came too slowly (http/slow-requests.ts); the message is the client's answer. */
class SlowUpload extends Error {}

const noop = () => {};

interface RequestDeadline {
  /** The body's head has arrived and the rest now streams to the MCP server: the rate rule applies. */
  streaming(): void;
  disarm(): void;
}

/**
 * The request's one timer. Progress is read off the request socket's byte count when it fires (no
 * work per chunk).
 *
 * Always: fires `UpstreamTimeout` once `ms` pass without response headers and without upload
 * progress; bytes that arrived since the last look earn another `ms`. So the deadline falls between
 * `ms` and `2 ms` after the client's last byte, whether its upload is still open or has just completed.
 *
 * With `upload` (the body was still arriving when the proxy started), also `SlowUpload`: when the
 * part of the body read before the MCP server is contacted (request-body.ts) has not arrived within
 * `bodyDeadlineMs`, however steadily it trickles; and, once the rest streams, when a `rateWindowMs`
 * brings less than `minUploadBytesPerSecond`, unless bytes wait unread in the broker (then the MCP
 * server is the slow side, and the inactivity rule is the one that speaks).
 */
function requestDeadline(ms: number, request: IncomingMessage, upload: SlowClientLimits | undefined, expire: (reason: Error) => void): RequestDeadline {
  let seen = request.socket?.bytesRead ?? 0;
  if (upload === undefined) {
    const timer = setTimeout(function check() {
      const now = request.socket?.bytesRead ?? seen;
      if (now !== seen) {
        seen = now;
        timer.refresh();
        return;
      }
      expire(new UpstreamTimeout());
    }, ms);
    return { streaming: noop, disarm: () => clearTimeout(timer) };
  }
  const started = Date.now();
  let lastProgress = started;
  let phase: "head" | "stream" | "done" = "head";
  let windowStart = started;
  let windowBytes = seen;
  let timer: NodeJS.Timeout;
  const arm = (now: number) => {
    let next = lastProgress + ms - now;
    if (phase === "head") next = Math.min(next, started + upload.bodyDeadlineMs - now);
    else if (phase === "stream") next = Math.min(next, windowStart + upload.rateWindowMs - now);
    timer = setTimeout(check, Math.max(1, next));
  };
  const check = () => {
    const now = Date.now();
    const bytes = request.socket?.bytesRead ?? seen;
    if (bytes !== seen) {
      seen = bytes;
      lastProgress = now;
    }
    if (request.complete) phase = "done";
    if (phase === "head" && now - started >= upload.bodyDeadlineMs) {
      return expire(new SlowUpload(`The upload did not arrive within ${upload.bodyDeadlineMs / 1000} s.`));
    }
    if (phase === "stream" && now - windowStart >= upload.rateWindowMs) {
      const rate = ((bytes - windowBytes) * 1000) / (now - windowStart);
      if (rate < upload.minUploadBytesPerSecond && request.readableLength === 0) {
        return expire(new SlowUpload(`The upload is too slow (under ${upload.minUploadBytesPerSecond} bytes per second).`));
      }
      windowStart = now;
      windowBytes = bytes;
    }
    if (now - lastProgress >= ms) return expire(new UpstreamTimeout());
    arm(now);
  };
  arm(started);
  return {
    streaming() {
      if (phase !== "head") return;
      phase = "stream";
      windowStart = Date.now();
      windowBytes = request.socket?.bytesRead ?? seen;
      clearTimeout(timer);
      arm(windowStart);
    },
    disarm: () => clearTimeout(timer),
  };
}

/**
 * Drops a response body nobody will read. undici's body emits "error" (RequestAbortedError) when
 * destroyed; without a listener that error would end the process.
 */
function discard(body: Readable): void {
  body.on("error", () => {});
  body.destroy();
}

/**
 * The broker's own answer to the MCP server's 401 or 403, or null to pass the response on (without
 * its WWW-Authenticate, which would send the client to an authorization server the client does not
 * use: the MCP server sits behind the broker and never sees the client's token).
 *
 * - 401: the MCP server refused the caller the broker vouched for (with FORWARD_UPSTREAM_TOKEN, say
 *   an upstream token it no longer accepts): the broker's 401 challenge, invalid_token, so that the
 *   client authorizes again, for the scopes it holds.
 * - 403 with `Bearer error="insufficient_scope", scope="…"` (RFC 6750 §3.1): the MCP 2025-11-25 scope
 *   challenge (https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#scope-challenge-handling).
 *   The broker's 403 names the caller's granted scopes plus the ones asked for: clients of that
 *   revision (the TypeScript SDK 1.x among them) request exactly the challenge's scope, so naming
 *   only the new one would cost them what they hold; clients that add it to what they hold
 *   (SEP-2350, modelcontextprotocol/modelcontextprotocol#2350) get the same set. Scopes the broker
 *   cannot grant are left out; when nothing grantable is missing, a plain 403 without a challenge,
 *   or the client would loop through authorizations that cannot help.
 */
function backendRefusal(
  status: number,
  header: string | string[] | undefined,
  identity: CallerIdentity,
  options: McpProxyOptions["challenge"],
  log: () => Logger,
): OAuthError | null {
  if (!options) return null;
  const granted = scopeList(identity.scopes.join(" "));
  if (status === 401) {
    const description = "The MCP server did not accept this authorization; authorize again.";
    log().info({ clientId: identity.clientId, grantId: identity.grantId }, "MCP server answered 401: the broker's challenge instead");
    return new OAuthError("invalid_token", description, {
      status: 401,
      headers: { "WWW-Authenticate": challenge(options, { code: "invalid_token", description, scope: granted.join(" ") || options.requiredScope }) },
    });
  }
  const params = parseBearerChallenge(header);
  if (params?.error !== "insufficient_scope") return null;
  const asked = scopeList(params.scope);
  const grantable = asked.filter((s) => options.knownScopes.includes(s));
  const missing = grantable.filter((s) => !granted.includes(s));
  // (Named with what is held: scopeRefusal.)
  log().info({ clientId: identity.clientId, grantId: identity.grantId, asked: asked.join(" ").slice(0, 200), missing }, "MCP server asked for more scope");
  if (missing.length === 0) {
    return new OAuthError(
      "insufficient_scope",
      asked.length
        ? `The MCP server requires the scope ${asked.join(" ").slice(0, 200)}, which this authorization server cannot grant.`
        : "The MCP server refused this request for lack of a scope it did not name.",
      { status: 403 },
    );
  }
  return scopeRefusal(granted, missing, options);
}

/**
 * 403 insufficient_scope naming what the caller holds plus what is missing (see backendRefusal):
 * the challenge MCP clients step up on. For the MCP server's own refusals and the tool rules' alike.
 */
function scopeRefusal(granted: readonly string[], missing: readonly string[], options: ChallengeOptions): OAuthError {
  const description = `This request needs the scope ${missing.join(" ")}.`;
  return new OAuthError("insufficient_scope", description, {
    status: 403,
    headers: {
      "WWW-Authenticate": challenge(options, { code: "insufficient_scope", description, scope: [...new Set([...granted, ...missing])].sort().join(" ") }),
    },
  });
}

/** The body parsed; undefined when it is not JSON (nothing to compare: the MCP server answers it). */
function parsedJson(body: Buffer): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(body.toString("utf8")) as unknown };
  } catch {
    return undefined;
  }
}

function errorCode(err: unknown): string | undefined {
  const e = err as { code?: unknown; cause?: { code?: unknown } } | null;
  const code = e?.code ?? e?.cause?.code;
  return typeof code === "string" ? code : undefined;
}

export function createMcpProxy(options: McpProxyOptions): McpProxy {
  const target = new URL(options.targetUrl);
  // Longest first, so /broker/mcp is not read as a path under /mcp's neighbour.
  const mountPaths = [...(options.mountPaths ?? ["/mcp"])].sort((a, b) => b.length - a.length);
  // Our own deadline (below) replaces undici's header/body timeouts: SSE bodies never time out,
  // and a slow but progressing upload is not cut.
  const pool = new Pool(target.origin, { connect: { timeout: options.timeoutMs }, headersTimeout: 0, bodyTimeout: 0 });
  const inFlight = new Set<AbortController>();

  /** Answers a failed upstream request, unless nobody is listening any more. */
  function failed(ctx: Koa.Context, log: Logger, reason: unknown, err: unknown): void {
    if (reason instanceof ClientGone || ctx.req.socket.destroyed) {
      log.debug("client went away before the MCP server answered");
      options.observer?.proxyFailed("client_gone");
      return;
    }
    if (reason instanceof SlowUpload) {
      log.info({ err: reason.message }, "client upload too slow");
      // The rest of the body is not wanted: the connection closes after this answer.
      ctx.set("Connection", "close");
      jsonRpcError(ctx, 408, -32000, reason.message);
      return;
    }
    if (err instanceof BodyTooLarge) {
      // The rest of the body is not wanted: the connection closes after this answer.
      ctx.set("Connection", "close");
      jsonRpcError(ctx, 413, -32000, err.message);
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
    jsonRpcError(
      ctx,
      502,
      -32603,
      code && UNREACHABLE_CODES.has(code) ? "The MCP server is unreachable." : "The connection to the MCP server failed before it answered.",
    );
  }

  /**
   * The tool rules on a request read whole: its calls decided one by one. Answered here (a refused
   * call's JSON-RPC error, 403 insufficient_scope to step up, 400 for a call that cannot be read)
   * or passed on, with the tools/list requests whose answers are to be filtered.
   */
  function toolRules(ctx: Koa.Context, identity: CallerIdentity, body: Buffer, log: () => Logger): "answered" | RequestCalls {
    const policy = options.toolPolicy!;
    const parsed = parseRequestBody(body);
    if ("refusal" in parsed) {
      ctx.status = 400;
      ctx.set("Cache-Control", "no-store");
      ctx.body = parsed.refusal;
      return "answered";
    }
    const read = callsIn(parsed.value);
    const verdict = decideCalls(policy, { facts: identity.facts, scopes: identity.scopes }, read);
    if (verdict.kind === "forward") return read;
    if (verdict.kind === "insufficient-scope") {
      log().info(
        { clientId: identity.clientId, grantId: identity.grantId, scopes: verdict.scopes },
        "tool call needs more scope: the client is asked to step up",
      );
      if (!options.challenge) {
        ctx.status = 403;
        ctx.body = errorResponse(read.requestIds[0] ?? null, TOOL_NOT_PERMITTED, `This call needs the scope ${verdict.scopes.join(" ")}.`);
        return "answered";
      }
      throw scopeRefusal(scopeList(identity.scopes.join(" ")), verdict.scopes, options.challenge);
    }
    for (const refused of verdict.refused) {
      log().info(
        { clientId: identity.clientId, grantId: identity.grantId, tool: refused.tool.slice(0, 100), rule: refused.decision.rule },
        "tool call refused by the tool rules",
      );
      options.toolDenied?.(refused, identity);
    }
    if (verdict.refused.length > 0) ctx.state.refusal = "tool_denied";
    ctx.status = verdict.status;
    ctx.set("Cache-Control", "no-store");
    ctx.body = verdict.body;
    return "answered";
  }

  /** The filter of tools/list answers for this caller, when the rules hide tools and the answer may hold a list. */
  function listFilter(
    identity: CallerIdentity,
    upstreamHeaders: IncomingHttpHeaders,
    answers: ListAnswers | undefined,
    log: () => Logger,
  ): ToolListFilter | undefined {
    const policy = options.toolPolicy;
    if (!policy?.hidesTools || answers === undefined) return undefined;
    if (answers !== "get-stream" && answers.toolLists.length === 0) return undefined;
    const caller = { facts: identity.facts, scopes: identity.scopes };
    return new ToolListFilter({
      contentType: upstreamHeaders["content-type"] as string | undefined,
      contentEncoding: upstreamHeaders["content-encoding"] as string | undefined,
      answers,
      visible: (tool) => policy.visible(tool, caller),
      onWithheld: (reason) => log().warn({ clientId: identity.clientId, reason }, "a tools/list answer could not be filtered and was withheld"),
    });
  }

  async function middleware(ctx: Koa.Context, identity: CallerIdentity): Promise<void> {
    // Looked up only when something is logged: the request's child logger is made on first use.
    // Without the broker's requestContext (the proxy used on its own) there is none.
    const log = (): Logger => ctx.state.log ?? options.logger;
    if (refusedMethod(ctx)) return;
    const mount = mountPaths.find((m) => ctx.path === m || ctx.path.startsWith(`${m}/`)) ?? mountPaths[0]!;
    const path = upstreamPath(target, mount, ctx.path, ctx.querystring);
    if (path === null) return jsonRpcError(ctx, 400, -32000, "The request path is not valid for the MCP endpoint.");

    const owner = sessionOwnerKey(identity);
    const sessionId = ctx.get("mcp-session-id") || undefined;
    const bound = sessionId === undefined ? undefined : await options.sessionBinding.ownerOf(sessionId);
    // Only ids the MCP server issued are bound (below): any other is unknown, whoever guessed or kept
    // it. 404 is what the transport says of an ended session: the client initializes a new one.
    if (sessionId !== undefined && bound === undefined) {
      log().info({ clientId: identity.clientId, grantId: identity.grantId }, "MCP session id the broker never saw issued (or forgot): 404");
      return sessionNotFound(ctx, "initialize a new MCP session.");
    }
    if (bound !== undefined && bound !== owner) return refuseForeignSession(ctx, identity, log());
    if (ctx.req.readableDidRead) throw new Error("The /mcp request body was already read: the MCP route must not have a body parser.");

    // A body still arriving takes one of the client address's places until it has arrived; an
    // address with none left is refused at once (http/slow-requests.ts).
    let release: (() => void) | undefined;
    if (ctx.method === "POST" && !ctx.req.complete) {
      release = admitReceiving(ctx);
      if (release === undefined) {
        ctx.set("Retry-After", String(retryAfterSeconds(ctx.app)));
        ctx.set("Connection", "close");
        return jsonRpcError(ctx, 429, -32000, TOO_MANY_BODIES);
      }
    }

    const controller = new AbortController();
    let span: ProxySpan | undefined;
    inFlight.add(controller);
    const deadline = requestDeadline(options.timeoutMs, ctx.req, release && slowClientLimits(ctx.app), (reason) => controller.abort(reason));
    const onClose = () => {
      if (!ctx.res.writableFinished) controller.abort(new ClientGone());
    };
    ctx.res.once("close", onClose);
    try {
      let upstream: Awaited<ReturnType<Pool["request"]>>;
      let sent: Buffer | null = null;
      /** What the answer holds that the tool rules filter: this request's tools/list answers. */
      let listed: RequestCalls | undefined;
      try {
        // Headers that mirror the body are checked against all of it, so it is read whole.
        const mirrored = mirrorsBody(ctx.req.headers);
        // With tool rules, every call is read before anything is sent: the whole body, too.
        const ruled = options.toolPolicy?.needsAnalysis === true;
        const body = await upstreamBody(ctx.req, controller.signal, mirrored || ruled);
        if (Buffer.isBuffer(body)) {
          sent = body;
          ctx.state.rpcMethods = rpcMethods(body);
        }
        if (release !== undefined) {
          if (isStreamed(body)) {
            deadline.streaming();
            ctx.req.once("end", release);
          } else release();
        }
        if (mirrored && Buffer.isBuffer(body)) {
          const message = parsedJson(body);
          const mismatch = message && headerMismatch(ctx.req.headers, message.value);
          if (message && mismatch !== undefined) {
            log().info({ clientId: identity.clientId, grantId: identity.grantId, mismatch }, "MCP request refused: its headers disagree with its body");
            return jsonRpcError(ctx, 400, HEADER_MISMATCH, mismatch, requestId(message.value));
          }
        }
        if (ruled && Buffer.isBuffer(body)) {
          const decided = toolRules(ctx, identity, body, log);
          if (decided === "answered") return;
          listed = decided;
        }
        const asked = performance.now();
        span = startProxySpan(target, ctx.method, path);
        upstream = await pool.request({
          method: ctx.method as "GET" | "POST" | "DELETE",
          path,
          headers: withProxyTraceContext(
            span,
            upstreamRequestHeaders(ctx.req.headers, identity, forwardedConnection(ctx, options.publicUrl), options.forwardUpstreamToken, options.serverName),
          ),
          // undici documents AsyncIterable bodies (Dispatcher.md); its type declarations lag.
          body: body as Buffer | Readable | null,
          signal: controller.signal,
        });
        options.observer?.mcpServerAnswered((performance.now() - asked) / 1000);
      } catch (err) {
        // The broker's own answer (the tool rules' step-up challenge), not a failure of the MCP server.
        if (err instanceof OAuthError) throw err;
        endProxySpan(span, controller.signal.reason ?? err);
        return failed(ctx, log(), controller.signal.reason, err);
      } finally {
        deadline.disarm();
      }

      const status = upstream.statusCode;
      options.answered?.({
        status,
        method: ctx.method,
        contentType: upstream.headers["content-type"] as string | undefined,
        wwwAuthenticate: upstream.headers["www-authenticate"],
        sessionSent: sessionId !== undefined,
        tokenSent: options.forwardUpstreamToken,
      });
      proxyAnswered(span, status);
      if (status === 401 || status === 403) {
        const refusal = backendRefusal(status, upstream.headers["www-authenticate"], identity, options.challenge, log);
        if (refusal) {
          discard(upstream.body);
          throw refusal;
        }
      }
      if (status >= 200 && status < 300) {
        let refused = false;
        try {
          if (ctx.method === "DELETE" && sessionId !== undefined) {
            await options.sessionBinding.release(sessionId);
          } else if (sessionId === undefined) {
            // The MCP server issues a session in its answer to an initialize (sent without one):
            // bound now to the caller, before the client can learn the id from this answer.
            const issued = upstream.headers["mcp-session-id"];
            refused = typeof issued === "string" && (await options.sessionBinding.claim(issued, owner)) !== owner;
          }
        } catch (err) {
          // The binding's store failed (database down): the MCP server's answer goes nowhere.
          discard(upstream.body);
          throw err;
        }
        if (refused) {
          discard(upstream.body);
          return refuseForeignSession(ctx, identity, log(), "MCP session claimed by another caller first");
        }
      }

      ctx.respond = false;
      let headers = clientResponseHeaders(upstream.headers);
      // Only the broker challenges its clients (backendRefusal above).
      delete headers["www-authenticate"];
      const filter = listFilter(identity, upstream.headers, ctx.method === "GET" ? "get-stream" : listed, log);
      if (filter) headers = filter.responseHeaders(headers) as typeof headers;
      ctx.res.writeHead(status, headers);
      ctx.res.flushHeaders();
      const streamed = /^text\/event-stream/i.test(String(upstream.headers["content-type"] ?? ""))
        ? options.streams?.opened(ctx.res, upstream.body, ctx.method === "POST" ? (sent ?? Buffer.alloc(0)) : null)
        : undefined;
      try {
        await pump(filter ? upstream.body.pipe(filter) : upstream.body, ctx.res);
      } catch (err) {
        if (!(controller.signal.reason instanceof ClientGone)) {
          log().info({ code: errorCode(err), err: (err as Error)?.message }, "MCP response stream ended abnormally");
        }
      } finally {
        streamed?.();
      }
    } finally {
      endProxySpan(span);
      deadline.disarm();
      release?.();
      ctx.res.off("close", onClose);
      inFlight.delete(controller);
    }
  }

  return {
    middleware,
    async close() {
      for (const controller of inFlight) controller.abort(new ShuttingDown());
      await pool.destroy();
    },
  };
}
