// The /mcp front end: the steps every MCP request passes before a backend sees it, written once
// for both backends (the HTTP proxy, proxy.ts, and the stdio bridge, stdio-handler.ts), which
// only relay. In order: the Origin check, CORS and bearer authentication (router.ts, in front of
// this), the method check, the session's owner (an unknown session 404, another caller's 403,
// counted as `session_owner`), then, on the body the backend reads whole, the access log's
// method names, the header/body agreement (header-consistency.ts) and the tool rules
// (tool-rules.ts), whose tools/list filter the backend applies to its answer.
//
// The backend reads the body because how it reads differs: the proxy streams a large body to the
// MCP server under its upstream deadline, the bridge needs it whole and parsed for the SDK's
// transport. Whatever it reads whole goes through `screen` before anything leaves.
import type Koa from "koa";
import type { Logger } from "../logger.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import type { ToolPolicy } from "../grants/tool-policy.ts";
import { jsonRpcError } from "./json-rpc-error.ts";
import { sessionOwnerKey } from "./session-binding.ts";
import { HEADER_MISMATCH, headerMismatch, mirrorsBody, requestId } from "./header-consistency.ts";
import { rpcMethods } from "./rpc-methods.ts";
import type { McpHandler } from "./router.ts";
import type { RefusedCall, RequestCalls } from "./tool-calls.ts";
import type { ListAnswers, ToolListFilter } from "./tool-list-filter.ts";
import { applyToolRules, toolListAnswers, toolListFilter, type AnswerHeaders, type ListAnswer } from "./tool-rules.ts";
import type { BrokerChallenge } from "./scope-challenge.ts";
import { answerMissingConnection, type ConnectionGate } from "./connection-gate.ts";

const ALLOWED_METHODS = ["GET", "POST", "DELETE"];
/** What the transport answers for a session it does not know: the client initializes a new one. */
export const SESSION_NOT_FOUND = -32001;

/** Answers 405 (with Allow) to a method Streamable HTTP does not define; true when it did. */
export function refusedMethod(ctx: Koa.Context): boolean {
  if (ALLOWED_METHODS.includes(ctx.method)) return false;
  ctx.set("Allow", ALLOWED_METHODS.join(", "));
  jsonRpcError(ctx, 405, -32000, `Method ${ctx.method} is not allowed on the MCP endpoint; use GET, POST or DELETE.`);
  return true;
}

/** Answers 403 to a caller presenting a session another caller owns (or claimed first), and counts it. */
export function refuseForeignSession(
  ctx: Koa.Context,
  identity: CallerIdentity,
  log: Logger,
  why = "MCP session presented by a caller who does not own it",
): void {
  log.warn({ clientId: identity.clientId, grantId: identity.grantId }, why);
  ctx.state.refusal = "session_owner";
  jsonRpcError(ctx, 403, -32000, "Mcp-Session-Id belongs to another user");
}

/** Answers 404 to a session that is unknown or has ended. */
export function sessionNotFound(ctx: Koa.Context, why: string): void {
  jsonRpcError(ctx, 404, SESSION_NOT_FOUND, `Session not found: ${why}`);
}

/** What the front end learnt from a body read whole. */
export interface ScreenedBody {
  /** The request's calls as the tool rules read them (its tools/list ids among them); undefined without rules. */
  readonly listed: RequestCalls | undefined;
}

/** One request, as the front end hands it to the backend once its own checks passed. */
export interface McpRequest {
  readonly identity: CallerIdentity;
  readonly sessionId: string | undefined;
  /** The request's logger (made on first use). */
  readonly log: () => Logger;
  /** The body must be read whole before anything leaves: its headers mirror it, or tool rules read it. */
  readonly readWhole: boolean;
  /**
   * The front end's checks of a body read whole (`parsed`: the backend's own parse, if it made
   * one). Undefined when the front end has answered; throws the step-up challenge.
   */
  screen(body: Buffer, parsed?: { readonly value: unknown }): ScreenedBody | undefined;
  /** The byte filter of the tools/list answers in an HTTP answer; undefined: pass it as it is. */
  listFilter(headers: AnswerHeaders, answers: ListAnswers | undefined): ToolListFilter | undefined;
  /** For a backend that writes answers itself: a tools/list answer as this caller may see it. */
  readonly listAnswer: ((answer: ListAnswer) => ListAnswer) | undefined;
}

export interface McpBackend {
  /** The owner key (sessionOwnerKey) of a session the backend serves; undefined for one it does not know or that ended. */
  sessionOwner(sessionId: string): Promise<string | undefined> | string | undefined;
  /** Serves the request; resolves when its response has ended. */
  relay(ctx: Koa.Context, request: McpRequest): Promise<void>;
}

export interface FrontEndOptions {
  readonly logger: Logger;
  /** The server's tool rules (grants/tool-policy.ts): calls decided before they leave, lists filtered on their way back. */
  readonly toolPolicy?: ToolPolicy;
  /** Told of each call the tool rules refused (the audit trail). */
  readonly toolDenied?: (refused: RefusedCall, identity: CallerIdentity) => void;
  /** How the broker challenges for a scope the tool rules require. */
  readonly challenge?: BrokerChallenge;
  /** A server that needs a connected account: what a caller without one is answered. */
  readonly connectionGate?: ConnectionGate;
}

/** The body parsed; undefined when it is not JSON (nothing to compare: the MCP server answers it). */
function parsedJson(body: Buffer): { value: unknown } | undefined {
  try {
    return { value: JSON.parse(body.toString("utf8")) as unknown };
  } catch {
    return undefined;
  }
}

/** The checks of a body read whole (McpRequest.screen). */
function screenBody(ctx: Koa.Context, identity: CallerIdentity, options: FrontEndOptions, log: () => Logger) {
  return (body: Buffer, parsed?: { readonly value: unknown }): ScreenedBody | undefined => {
    let methods: readonly string[] | undefined;
    ctx.state.rpcMethods = () => (methods ??= rpcMethods(body));
    options.connectionGate?.eliciting.noteInitialize(identity.grantId, body);
    const message = parsed ?? (mirrorsBody(ctx.req.headers) ? parsedJson(body) : undefined);
    const mismatch = message && headerMismatch(ctx.req.headers, message.value);
    if (message && mismatch !== undefined) {
      log().info({ clientId: identity.clientId, grantId: identity.grantId, mismatch }, "MCP request refused: its headers disagree with its body");
      jsonRpcError(ctx, 400, HEADER_MISMATCH, mismatch, requestId(message.value));
      return undefined;
    }
    const policy = options.toolPolicy;
    if (!policy?.needsAnalysis) return { listed: undefined };
    const decided = applyToolRules(ctx, identity, body, { policy, challenge: options.challenge, toolDenied: options.toolDenied }, log);
    return decided === "answered" ? undefined : { listed: decided };
  };
}

/**
 * The request's logger: its child logger, made on first use by the broker's requestContext.
 * Without that middleware (the proxy used on its own) there is none, and `fallback` logs.
 */
export function requestLogger(ctx: Koa.Context, fallback: Logger): Logger {
  return ctx.state.log ?? fallback;
}

/** The MCP handler of a server: the front end's steps, then its backend. */
export function mcpFrontEnd(backend: McpBackend, options: FrontEndOptions): McpHandler {
  return async (ctx, identity) => {
    // Looked up only when something is logged: the request's child logger is made on first use.
    const log = (): Logger => requestLogger(ctx, options.logger);
    if (refusedMethod(ctx)) return;
    const sessionId = ctx.get("mcp-session-id") || undefined;
    if (sessionId !== undefined) {
      // Checked before the body is read: nothing of another user's request goes anywhere. Only ids
      // the MCP server issued (and the broker bound) are known: any other is unknown, whoever
      // guessed or kept it. 404 is what the transport says of an ended session.
      const owner = await backend.sessionOwner(sessionId);
      if (owner === undefined) {
        log().info({ clientId: identity.clientId, grantId: identity.grantId }, "MCP session unknown to the broker or ended: 404");
        return sessionNotFound(ctx, "it is unknown or has ended; initialize a new MCP session.");
      }
      if (owner !== sessionOwnerKey(identity)) return refuseForeignSession(ctx, identity, log());
    }
    // Nothing goes to a server that needs an account the user has not connected (or lost).
    if (identity.connection?.missing && options.connectionGate) return answerMissingConnection(ctx, identity, options.connectionGate);
    const policy = options.toolPolicy;
    // Returned, not awaited: this frame is not kept while the answer is relayed.
    return backend.relay(ctx, {
      identity,
      sessionId,
      log,
      // A server that needs a connected account reads what its clients declare at initialize.
      readWhole: mirrorsBody(ctx.req.headers) || policy?.needsAnalysis === true || options.connectionGate !== undefined,
      screen: screenBody(ctx, identity, options, log),
      listFilter: (headers, answers) => toolListFilter(policy, identity, headers, answers, log),
      listAnswer: toolListAnswers(policy, identity),
    });
  };
}
