// PUBLIC_URL/mcp in front of a stdio MCP server (MCP_SERVER_COMMAND): picks the caller's session,
// or starts one on `initialize`, and hands the request to it (src/stdio/). Everything a session may
// refuse is decided here, before a byte reaches any child: another user's session id (403), an
// unknown or ended session (404), a limit (503), a client without a user where the server needs
// the user's token (403).
// A request without a session that carries the MCP 2026-07-28 envelope (its protocol version in
// `_meta`) is served statelessly: it goes to the warm child of the caller's grant, never to another
// grant's, and a 2026-07-28 client works in front of a server written for an earlier revision.
import type Koa from "koa";
import type { Logger } from "../logger.ts";
import type { McpHandler } from "./router.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { sessionOwnerKey } from "./session-binding.ts";
import { jsonRpcError } from "./json-rpc-error.ts";
import { refusedMethod, refuseForeignSession, sessionNotFound } from "./front-end.ts";
import { HEADER_MISMATCH, headerMismatch, requestId } from "./header-consistency.ts";
import { readRaw } from "../http/body.ts";
import { CHECKED_BODY_BYTES } from "./request-body.ts";
import { ProcessLimitReached, type SessionRegistry } from "../stdio/session-registry.ts";
import { ChildStartFailed } from "../stdio/child-process.ts";
import type { BridgeSession } from "../stdio/bridge-session.ts";
import type { SessionOwner } from "../stdio/child-holder.ts";
import { HandshakeFailed } from "../stdio/stateless-child.ts";
import { envelopeVersion, isModernVersion, META, refusal, type Json } from "../stdio/modern-era.ts";

export interface StdioHandlerOptions {
  readonly registry: SessionRegistry;
  /** MCP_SERVER_TOKEN_ENV is set: every child needs its user's upstream token. */
  readonly passesToken: boolean;
  readonly logger: Logger;
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

/** The POST body parsed, undefined when it is not JSON (the SDK transport then answers 415). */
async function readBody(ctx: Koa.Context, limit: number): Promise<{ value: unknown } | "invalid" | undefined> {
  if (ctx.method !== "POST" || !ctx.is("application/json")) return undefined;
  const text = await readRaw(ctx, limit);
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return "invalid";
  }
}

export function stdioMcpHandler(options: StdioHandlerOptions): McpHandler {
  const { registry } = options;
  const limit = options.maxBodyBytes ?? CHECKED_BODY_BYTES;

  const serve = async (ctx: Koa.Context, session: BridgeSession, body: unknown) => {
    ctx.respond = false;
    await session.handle(ctx.req, ctx.res, body);
  };

  /** A child for the caller, or undefined when the answer (403, 503, 502) has been set. */
  const childFor = async <T>(ctx: Koa.Context, identity: CallerIdentity, log: Logger, start: (owner: SessionOwner) => Promise<T>): Promise<T | undefined> => {
    if (options.passesToken && identity.upstreamAccessToken === undefined) {
      jsonRpcError(ctx, 403, -32000, "This MCP server runs as the signed-in user, and this client has no user (client credentials).");
      return undefined;
    }
    try {
      return await start({ key: sessionOwnerKey(identity), grantId: identity.grantId, upstreamToken: identity.upstreamAccessToken });
    } catch (err) {
      if (err instanceof ProcessLimitReached) {
        log.info({ clientId: identity.clientId, grantId: identity.grantId }, "stdio MCP server refused: process limit");
        ctx.set("Retry-After", String(err.retryAfterSeconds));
        jsonRpcError(ctx, 503, -32000, err.message);
        return undefined;
      }
      if (err instanceof ChildStartFailed) {
        log.error({ err: err.message }, "the stdio MCP server could not be started: check MCP_SERVER_COMMAND, MCP_SERVER_CWD and PATH");
        jsonRpcError(ctx, 502, -32603, "The MCP server could not be started.");
        return undefined;
      }
      if (err instanceof HandshakeFailed) {
        log.error({ err: err.message }, "the stdio MCP server started but did not complete the MCP handshake");
        jsonRpcError(ctx, 502, -32603, "The MCP server could not be started.");
        return undefined;
      }
      throw err;
    }
  };

  const start = async (ctx: Koa.Context, identity: CallerIdentity, log: Logger, body: unknown) => {
    const session = await childFor(ctx, identity, log, (owner) => registry.open(owner));
    if (!session) return;
    try {
      await serve(ctx, session, body);
    } finally {
      // The transport refused the initialize (Accept, Content-Type…): no session, no child.
      if (session.sessionId === undefined) await session.end("initialization was refused");
    }
  };

  /** A request of the 2026-07-28 era: no session, the grant's warm child. */
  const stateless = async (ctx: Koa.Context, identity: CallerIdentity, log: Logger, message: Json) => {
    // A header and body that both name a version and disagree were refused above; here one of the
    // two is missing, which this revision's server must refuse the same way (the header is required).
    if ((ctx.get("mcp-protocol-version") || undefined) !== envelopeVersion(message)) {
      return rpcError(ctx, 400, message.id, {
        code: HEADER_MISMATCH,
        message: "Header mismatch: the MCP-Protocol-Version header and the request's _meta protocol version are both required, and must agree.",
      });
    }
    const refused = refusal(message);
    if (refused) {
      const { status, ...error } = refused;
      return rpcError(ctx, status, message.id, error);
    }
    if (typeof message.method !== "string")
      return rpcError(ctx, 400, message.id, { code: -32600, message: "Invalid Request: a JSON-RPC request or notification was expected." });
    // No client notification is defined over HTTP in this revision: accepted, nothing to forward.
    if (!("id" in message)) {
      ctx.status = 202;
      return;
    }
    if (!registry.accepting) {
      ctx.set("Retry-After", "5");
      return jsonRpcError(ctx, 503, -32000, "The broker is shutting down; please retry.");
    }
    const clientInfo = (message.params as { _meta?: Json } | undefined)?._meta?.[META.clientInfo];
    const child = await childFor(ctx, identity, log, (owner) => registry.statelessChild(owner, clientInfo));
    if (!child) return;
    ctx.respond = false;
    if (message.method === "server/discover") return child.discover(message.id, ctx.res, ctx.get("accept") || undefined);
    await child.serve(message, ctx.req, ctx.res);
  };

  return async (ctx, identity) => {
    const log = (): Logger => ctx.state.log ?? options.logger;
    if (refusedMethod(ctx)) return;
    const sessionId = ctx.get("mcp-session-id") || undefined;
    const owner = sessionOwnerKey(identity);
    const session = sessionId === undefined ? undefined : registry.find(sessionId);
    // Checked before the body is read: nothing of another user's request goes anywhere.
    if (session && session.owner.key !== owner) return refuseForeignSession(ctx, identity, log());
    const body = await readBody(ctx, limit);
    if (body === "invalid") return jsonRpcError(ctx, 400, -32700, "Parse error: the request body is not valid JSON.");
    const mismatch = body && headerMismatch(ctx.req.headers, body.value);
    if (body && mismatch !== undefined) return jsonRpcError(ctx, 400, HEADER_MISMATCH, mismatch, requestId(body.value));

    if (sessionId === undefined) {
      const messages = Array.isArray(body?.value) ? (body.value as unknown[]) : [body?.value];
      if (ctx.method === "POST" && messages.some(isInitialize)) return start(ctx, identity, log(), body?.value);
      const headerVersion = ctx.get("mcp-protocol-version");
      if (ctx.method === "POST" && isObject(body?.value) && (envelopeVersion(body.value) !== undefined || isModernVersion(headerVersion))) {
        return stateless(ctx, identity, log(), body.value);
      }
      return jsonRpcError(ctx, 400, -32000, "Bad Request: Mcp-Session-Id header is required (send initialize first).");
    }
    if (session === undefined || session.isEnded) {
      return sessionNotFound(ctx, "it has ended; initialize a new one.");
    }
    // A refreshed upstream token reaches new sessions only: a child cannot be given a new
    // environment, so the old one ends and the client starts again with the new token.
    if (options.passesToken && identity.upstreamAccessToken !== session.owner.upstreamToken) {
      await session.end("the upstream token was renewed");
      return sessionNotFound(ctx, "the upstream credentials were renewed; initialize a new session.");
    }
    // A GET stream opened now would hold the shutdown's drain until its deadline.
    if (ctx.method === "GET" && !registry.accepting) {
      ctx.set("Retry-After", "5");
      return jsonRpcError(ctx, 503, -32000, "The broker is shutting down; please retry.");
    }
    const version = ctx.get("mcp-protocol-version");
    // Without the header the client speaks 2025-03-26, which has batches (transport spec).
    if (Array.isArray(body?.value) && version >= NO_BATCHES_FROM) {
      return jsonRpcError(ctx, 400, -32600, `Invalid Request: JSON-RPC batches are not part of MCP ${version}.`);
    }
    await serve(ctx, session, body?.value);
  };
}
