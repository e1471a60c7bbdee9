// Permissions per tool as the /mcp front end applies them, whichever backend serves the server:
// the calls of a request read whole decided one by one (tool-calls.ts) and answered here when
// refused — a JSON-RPC error naming the tool (audited, counted as `tool_denied`), a 403
// insufficient_scope challenge to step up on, a 400 for a body the broker cannot read — and the
// tools/list answers cut to what this caller may call (tool-list-filter.ts): as a byte filter for
// the HTTP proxy's JSON and SSE answers, message by message for the stdio bridge, which writes
// its answers itself.
import type Koa from "koa";
import type { Logger } from "../logger.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";
import type { ToolCaller, ToolPolicy } from "../grants/tool-policy.ts";
import { scopeList } from "../grants/scope.ts";
import { callsIn, decideCalls, errorResponse, parseRequestBody, TOOL_NOT_PERMITTED, type RefusedCall, type RequestCalls } from "./tool-calls.ts";
import { ToolListFilter, withoutHiddenTools, type ListAnswers } from "./tool-list-filter.ts";
import { scopeRefusal, type BrokerChallenge } from "./scope-challenge.ts";

export interface ToolRules {
  readonly policy: ToolPolicy;
  /** How the broker challenges for a missing scope; without it (a proxy used on its own), a plain 403 JSON-RPC error. */
  readonly challenge?: BrokerChallenge;
  /** Told of each call the rules refused (the audit trail). */
  readonly toolDenied?: (refused: RefusedCall, identity: CallerIdentity) => void;
}

const callerOf = (identity: CallerIdentity): ToolCaller => ({ facts: identity.facts, scopes: identity.scopes });

/** Sets a JSON-RPC answer of the broker's own that no cache may keep. */
function answer(ctx: Koa.Context, status: number, body: unknown): "answered" {
  ctx.status = status;
  ctx.set("Cache-Control", "no-store");
  ctx.body = body;
  return "answered";
}

/**
 * The calls of a request read whole, decided: answered here (see the top of this file) or passed
 * on, with the tools/list requests whose answers are to be filtered. A missing scope throws the
 * 403 challenge (an OAuthError the router's error handler sends with its WWW-Authenticate).
 */
export function applyToolRules(ctx: Koa.Context, identity: CallerIdentity, body: Buffer, rules: ToolRules, log: () => Logger): "answered" | RequestCalls {
  const parsed = parseRequestBody(body);
  if ("refusal" in parsed) return answer(ctx, 400, parsed.refusal);
  const read = callsIn(parsed.value);
  const verdict = decideCalls(rules.policy, callerOf(identity), read);
  if (verdict.kind === "forward") return read;
  const who = { clientId: identity.clientId, grantId: identity.grantId };
  if (verdict.kind === "insufficient-scope") {
    log().info({ ...who, scopes: verdict.scopes }, "tool call needs more scope: the client is asked to step up");
    if (!rules.challenge) {
      return answer(ctx, 403, errorResponse(read.requestIds[0] ?? null, TOOL_NOT_PERMITTED, `This call needs the scope ${verdict.scopes.join(" ")}.`));
    }
    throw scopeRefusal(scopeList(identity.scopes.join(" ")), verdict.scopes, rules.challenge);
  }
  for (const refused of verdict.refused) {
    log().info({ ...who, tool: refused.tool.slice(0, 100), rule: refused.decision.rule }, "tool call refused by the tool rules");
    rules.toolDenied?.(refused, identity);
  }
  if (verdict.refused.length > 0) ctx.state.refusal = "tool_denied";
  return answer(ctx, verdict.status, verdict.body);
}

/** The HTTP answer's headers the byte filter reads. */
export interface AnswerHeaders {
  readonly contentType: string | undefined;
  readonly contentEncoding: string | undefined;
}

/** The byte filter of tools/list answers for this caller, when the rules hide tools and the answer may hold a list. */
export function toolListFilter(
  policy: ToolPolicy | undefined,
  identity: CallerIdentity,
  headers: AnswerHeaders,
  answers: ListAnswers | undefined,
  log: () => Logger,
): ToolListFilter | undefined {
  if (!policy?.hidesTools || answers === undefined) return undefined;
  if (answers !== "get-stream" && answers.toolLists.length === 0) return undefined;
  const caller = callerOf(identity);
  return new ToolListFilter({
    ...headers,
    answers,
    visible: (tool) => policy.visible(tool, caller),
    onWithheld: (reason) => log().warn({ clientId: identity.clientId, reason }, "a tools/list answer could not be filtered and was withheld"),
  });
}

/** An answer to a tools/list request, as a backend that writes answers itself hands them over. */
export type ListAnswer = Record<string, unknown>;

/** A tools/list answer as this caller may see it, for such a backend; undefined when the rules hide nothing. */
export function toolListAnswers(policy: ToolPolicy | undefined, identity: CallerIdentity): ((answer: ListAnswer) => ListAnswer) | undefined {
  if (!policy?.hidesTools) return undefined;
  const caller = callerOf(identity);
  return (message) => withoutHiddenTools(message, (tool) => policy.visible(tool, caller)) ?? message;
}
