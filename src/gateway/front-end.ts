// The steps every MCP request passes before any backend sees it, written once and taken by both
// backends (the HTTP proxy and the stdio bridge) at the point where each has what the step needs:
// the method check, the refusal of another caller's session (counted as `session_owner`), and the
// session-not-found answer. The Origin check and bearer authentication come before, in the router.
import type Koa from "koa";
import type { Logger } from "../logger.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import { jsonRpcError } from "./json-rpc-error.ts";

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
