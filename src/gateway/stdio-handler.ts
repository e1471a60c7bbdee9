// PUBLIC_URL/mcp in front of a stdio MCP server (MCP_SERVER_COMMAND), behind the /mcp front end
// (front-end.ts: method, session owner, header/body agreement, tool rules): picks the caller's
// session, or starts one on `initialize`, and hands the request to it (src/stdio/). Everything a
// session may refuse is decided before a byte reaches any child: another user's session id (403)
// and an unknown or ended session (404) by the front end, here a limit (503) and a client without
// a user where the server needs the user's token (403).
// A request without a session that carries the MCP 2026-07-28 envelope (its protocol version in
// `_meta`) is served statelessly: it goes to the warm child of the caller's grant, never to another
// grant's, and a 2026-07-28 client works in front of a server written for an earlier revision.
import type Koa from "koa";
import type { McpHandler } from "./router.ts";
import { sessionOwnerKey } from "./session-binding.ts";
import { jsonRpcError } from "./json-rpc-error.ts";
import { mcpFrontEnd, sessionNotFound, type FrontEndOptions, type McpBackend, type McpRequest } from "./front-end.ts";
import { HEADER_MISMATCH } from "./header-consistency.ts";
import { readRaw } from "../http/body.ts";
import { CHECKED_BODY_BYTES } from "./request-body.ts";
import { ProcessLimitReached, type SessionRegistry } from "../stdio/session-registry.ts";
import { ChildStartFailed } from "../stdio/child-process.ts";
import type { BridgeSession } from "../stdio/bridge-session.ts";
import type { SessionOwner } from "../stdio/child-holder.ts";
import { HandshakeFailed } from "../stdio/stateless-child.ts";
import { envelopeVersion, isModernVersion, META, refusal, type Json } from "../stdio/modern-era.ts";

export interface StdioHandlerOptions extends FrontEndOptions {
  readonly registry: SessionRegistry;
  /** MCP_SERVER_TOKEN_ENV is set: every child needs its user's upstream token. */
  readonly passesToken: boolean;
  /** Largest POST body (default 4 MiB, as the SDK's own transport). */
  readonly maxBodyBytes?: number;
}

/** The first protocol revision without JSON-RPC batches. */
const NO_BATCHES_FROM = "2025-06-18";

const isInitialize = (message: unknown): boolean => (message as { method?: unknown } | null)?.method === "initialize";
const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);

/** A JSON-RPC error answering the request `id`, with the `data` the revision asks for. */
function rpcError(ctx: Koa.Context, status: number, id: unknown, error: { code: number; message: string; data?: Json }): void {
  ctx.status = status;
  ctx.set("Cache-Control", "no-store");
  ctx.body = { jsonrpc: "2.0", id: id ?? null, error };
}

/** A POST body read whole: its text, and its value when it is JSON. */
interface ReadBody {
  readonly text: string;
  readonly parsed: { readonly value: unknown } | undefined;
}

/**
 * The POST body, read when it is JSON (else the SDK transport answers 415) or when the front end
 * must see it whole (its headers mirror it, tool rules read it: a body of another type is checked
 * all the same, and still answered 415 by the transport).
 */
async function readBody(ctx: Koa.Context, limit: number, whole: boolean): Promise<ReadBody | undefined> {
  if (ctx.method !== "POST" || (!whole && !ctx.is("application/json"))) return undefined;
  const text = await readRaw(ctx, limit);
  try {
    return { text, parsed: { value: JSON.parse(text) as unknown } };
  } catch {
    return { text, parsed: undefined };
  }
}

/** What a session's request needs on its way to the child. */
interface SessionRequest {
  readonly ctx: Koa.Context;
  readonly request: McpRequest;
  /** The parsed JSON body the SDK transport is given; undefined for a GET, a DELETE, a body of another type. */
  readonly body: unknown;
}

/** A child for the caller, or undefined when the answer (403, 503, 502) has been set. */
async function childFor<T>(ctx: Koa.Context, request: McpRequest, passesToken: boolean, start: (owner: SessionOwner) => Promise<T>): Promise<T | undefined> {
  const { identity } = request;
  if (passesToken && identity.upstreamAccessToken === undefined) {
    jsonRpcError(ctx, 403, -32000, "This MCP server runs as the signed-in user, and this client has no user (client credentials).");
    return undefined;
  }
  try {
    return await start({
      key: sessionOwnerKey(identity),
      grantId: identity.grantId,
      upstreamToken: identity.upstreamAccessToken,
      connectionToken: identity.connection?.token,
    });
  } catch (err) {
    const log = request.log();
    if (err instanceof ProcessLimitReached) {
      log.info({ clientId: identity.clientId, grantId: identity.grantId }, "stdio MCP server refused: process limit");
      ctx.set("Retry-After", String(err.retryAfterSeconds));
      jsonRpcError(ctx, 503, -32000, err.message);
      return undefined;
    }
    if (!(err instanceof ChildStartFailed || err instanceof HandshakeFailed)) throw err;
    const why =
      err instanceof ChildStartFailed
        ? "the stdio MCP server could not be started: check MCP_SERVER_COMMAND, MCP_SERVER_CWD and PATH"
        : "the stdio MCP server started but did not complete the MCP handshake";
    log.error({ err: err.message }, why);
    jsonRpcError(ctx, 502, -32603, "The MCP server could not be started.");
    return undefined;
  }
}

/** 503 while the broker shuts down: no new child, no new stream to hold its drain. */
function shuttingDown(ctx: Koa.Context): void {
  ctx.set("Retry-After", "5");
  jsonRpcError(ctx, 503, -32000, "The broker is shutting down; please retry.");
}

/**
 * What a request of the 2026-07-28 era must be refused before it goes to a child (its version
 * header and envelope, a version or method the bridge does not serve, not a request); true when
 * answered. A notification is answered 202 here: none is defined over HTTP in this revision.
 */
function refusedStateless(ctx: Koa.Context, message: Json): boolean {
  // A header and body that both name a version and disagree were refused by the front end; here
  // one of the two is missing, which this revision's server must refuse the same way (the header is required).
  if ((ctx.get("mcp-protocol-version") || undefined) !== envelopeVersion(message)) {
    rpcError(ctx, 400, message.id, {
      code: HEADER_MISMATCH,
      message: "Header mismatch: the MCP-Protocol-Version header and the request's _meta protocol version are both required, and must agree.",
    });
    return true;
  }
  const refused = refusal(message);
  if (refused) {
    const { status, ...error } = refused;
    rpcError(ctx, status, message.id, error);
    return true;
  }
  if (typeof message.method !== "string") {
    rpcError(ctx, 400, message.id, { code: -32600, message: "Invalid Request: a JSON-RPC request or notification was expected." });
    return true;
  }
  if ("id" in message) return false;
  ctx.status = 202;
  return true;
}

/** What the stdio backend's steps share. */
interface Bridge {
  readonly registry: SessionRegistry;
  readonly passesToken: boolean;
}

async function serve({ ctx, request, body }: SessionRequest, session: BridgeSession): Promise<void> {
  ctx.respond = false;
  await session.handle(ctx.req, ctx.res, body, request.listAnswer);
}

/** An initialize: a new session, and its child. */
async function start({ registry, passesToken }: Bridge, r: SessionRequest): Promise<void> {
  const session = await childFor(r.ctx, r.request, passesToken, (owner) => registry.open(owner));
  if (!session) return;
  try {
    await serve(r, session);
  } finally {
    // The transport refused the initialize (Accept, Content-Type…): no session, no child.
    if (session.sessionId === undefined) await session.end("initialization was refused");
  }
}

/** A request of the 2026-07-28 era: no session, the grant's warm child. */
async function stateless({ registry, passesToken }: Bridge, ctx: Koa.Context, request: McpRequest, message: Json): Promise<void> {
  if (refusedStateless(ctx, message)) return;
  if (!registry.accepting) return shuttingDown(ctx);
  const clientInfo = (message.params as { _meta?: Json } | undefined)?._meta?.[META.clientInfo];
  const child = await childFor(ctx, request, passesToken, (owner) => registry.statelessChild(owner, clientInfo));
  if (!child) return;
  ctx.respond = false;
  if (message.method === "server/discover") return child.discover(message.id, ctx.res, ctx.get("accept") || undefined);
  await child.serve(message, ctx.req, ctx.res, request.listAnswer);
}

/** A request without a session: an initialize, a stateless request, or a mistake. */
function sessionless(bridge: Bridge, r: SessionRequest): Promise<void> | void {
  const { ctx, body } = r;
  const messages = Array.isArray(body) ? (body as unknown[]) : [body];
  if (ctx.method === "POST" && messages.some(isInitialize)) return start(bridge, r);
  if (ctx.method === "POST" && isObject(body) && (envelopeVersion(body) !== undefined || isModernVersion(ctx.get("mcp-protocol-version")))) {
    return stateless(bridge, ctx, r.request, body);
  }
  return jsonRpcError(ctx, 400, -32000, "Bad Request: Mcp-Session-Id header is required (send initialize first).");
}

/** A request of an open session. */
async function inSession({ registry, passesToken }: Bridge, r: SessionRequest, sessionId: string): Promise<void> {
  const { ctx, request, body } = r;
  const session = registry.find(sessionId);
  // Looked up again: the session may have ended while the body arrived.
  if (session === undefined || session.isEnded) return sessionNotFound(ctx, "it has ended; initialize a new one.");
  // A refreshed upstream token reaches new sessions only: a child cannot be given a new
  // environment, so the old one ends and the client starts again with the new token.
  if (
    (passesToken && request.identity.upstreamAccessToken !== session.owner.upstreamToken) ||
    request.identity.connection?.token !== session.owner.connectionToken
  ) {
    await session.end("the upstream token was renewed");
    return sessionNotFound(ctx, "the upstream credentials were renewed; initialize a new session.");
  }
  // A GET stream opened now would hold the shutdown's drain until its deadline.
  if (ctx.method === "GET" && !registry.accepting) return shuttingDown(ctx);
  const version = ctx.get("mcp-protocol-version");
  // Without the header the client speaks 2025-03-26, which has batches (transport spec).
  if (Array.isArray(body) && version >= NO_BATCHES_FROM) {
    return jsonRpcError(ctx, 400, -32600, `Invalid Request: JSON-RPC batches are not part of MCP ${version}.`);
  }
  await serve(r, session);
}

/** The stdio backend: relays a request the front end let through to the caller's session or warm child. */
function stdioBackend(options: StdioHandlerOptions): McpBackend {
  const bridge: Bridge = { registry: options.registry, passesToken: options.passesToken };
  const limit = options.maxBodyBytes ?? CHECKED_BODY_BYTES;
  return {
    sessionOwner(sessionId) {
      const session = options.registry.find(sessionId);
      return session === undefined || session.isEnded ? undefined : session.owner.key;
    },
    async relay(ctx, request) {
      const read = await readBody(ctx, limit, request.readWhole);
      const json = Boolean(ctx.is("application/json"));
      if (read && json && read.parsed === undefined) return jsonRpcError(ctx, 400, -32700, "Parse error: the request body is not valid JSON.");
      if (read && !request.screen(Buffer.from(read.text, "utf8"), read.parsed)) return;
      const r: SessionRequest = { ctx, request, body: json ? read?.parsed?.value : undefined };
      return request.sessionId === undefined ? sessionless(bridge, r) : inSession(bridge, r, request.sessionId);
    },
  };
}

export function stdioMcpHandler(options: StdioHandlerOptions): McpHandler {
  return mcpFrontEnd(stdioBackend(options), options);
}
