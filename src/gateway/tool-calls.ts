// The request side of permissions per tool: which tools a JSON-RPC request body calls, and what
// the broker does with the request once the tool policy (grants/tool-policy.ts) has spoken — pass
// it on, refuse it with 403 insufficient_scope so the client steps up, or answer it with JSON-RPC
// errors itself so that nothing reaches the MCP server. No Koa here: the /mcp front end reads the
// body, runs the header check (header-consistency.ts) on the same parsed value, and sends what
// this module decides. When the server has tool rules (ToolPolicy.needsAnalysis), every POST body
// is read whole and parsed here whatever its Content-Type: a server that does not check the type
// would still run the call.
//
// A policy is only as good as the broker's reading of the body agrees with the MCP server's, so
// what the broker cannot read the way every server reads it is refused, never passed on:
// - bytes that are not UTF-8, or a body JSON.parse refuses (a byte-order mark included, which some
//   servers' parsers skip): -32700;
// - a tools/call without an id a response could answer (a server might still run it) or without
//   a string params.name: -32600 / -32602;
// - a member name that differs from `jsonrpc`, `id`, `method`, `params` or (in a tools/call's
//   params) `name` only in case, or by `ſ`/`K`/`ı`: Go's encoding/json matches those to the field
//   (modelcontextprotocol/go-sdk#805, CVE-2026-27896), so `{"method":"tools/list","Method":
//   "tools/call"}` would be a tools/list here and a tools/call there.
// Duplicate member names are left alone: JSON.parse keeps the last, and so do the parsers MCP
// servers use (Python's json and pydantic's model_validate_json — checked —, Go's encoding/json,
// Jackson) or they refuse the message (serde's derived structs): none reads the first.
import { nameField, requestId, shown } from "./header-consistency.ts";
import type { ToolCaller, ToolDecision, ToolPolicy } from "../grants/tool-policy.ts";

export type RequestId = string | number;

/** JSON-RPC 2.0's codes the broker answers with here. */
export const PARSE_ERROR = -32700;
export const INVALID_REQUEST = -32600;
/**
 * A call of a tool the caller may not use. MCP answers a call of an unknown tool with -32602
 * (server/tools "Error Handling"), and a tool this caller is refused is one its tools/list never
 * showed; agentgateway answers its tool authorization refusals with the same code. Not a code of
 * -32000..-32019 (MCP 2026-07-28 basic "Error Codes": legacy, SHOULD NOT be used; -32001 means
 * "Session not found" or a request timeout to the SDKs) nor of -32020..-32099 (the specification's).
 */
export const TOOL_NOT_PERMITTED = -32602;
const INVALID_PARAMS = -32602;

export interface JsonRpcErrorResponse {
  readonly jsonrpc: "2.0";
  readonly id: RequestId | null;
  readonly error: { readonly code: number; readonly message: string };
}

export function errorResponse(id: RequestId | null, code: number, message: string): JsonRpcErrorResponse {
  return { jsonrpc: "2.0", id, error: { code, message } };
}

export interface ToolCall {
  readonly id: RequestId;
  readonly tool: string;
}

/** A message the broker refuses to pass on because it cannot read it as the MCP server would. */
export interface MalformedMessage {
  readonly id: RequestId | null;
  readonly code: number;
  readonly message: string;
}

export interface RequestCalls {
  /** The body is a JSON-RPC batch (MCP 2025-03-26 only). */
  readonly batch: boolean;
  /** The tools/call requests, in order. */
  readonly calls: readonly ToolCall[];
  readonly malformed: readonly MalformedMessage[];
  /** The ids of the tools/list requests, whose answers are filtered (tool-list-filter.ts). */
  readonly toolLists: readonly RequestId[];
  /** The id of every request of the body (a method and an id), in order: what must be answered. */
  readonly requestIds: readonly RequestId[];
}

const MESSAGE_MEMBERS = ["jsonrpc", "id", "method", "params"] as const;

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === "object" && !Array.isArray(value);

/** Go's encoding/json key folding: each character lower-cased, then upper-cased (ſ → S, K → K, ı → I). */
const goFold = (key: string): string => (ASCII.test(key) ? key.toUpperCase() : Array.from(key, (c) => c.toLowerCase().toUpperCase()).join(""));
const ASCII = /^[\x00-\x7f]*$/;
const FOLDED_NAMES = new Map<string, string>();
/** goFold of a member name of the protocol (a handful, kept). */
function foldedName(name: string): string {
  const known = FOLDED_NAMES.get(name);
  if (known !== undefined) return known;
  const folded = goFold(name);
  FOLDED_NAMES.set(name, folded);
  return folded;
}

/** A member of `object` that some server would read as one of `names` and the broker would not. */
function ambiguousMember(object: Record<string, unknown>, names: readonly string[]): string | undefined {
  const targets = names.map(foldedName);
  // Folding never makes a character shorter than one UTF-16 unit, so a key of more than twice the
  // longest name's units (surrogate pairs) cannot fold to one: no need to fold a megabyte of key.
  const longest = 2 * Math.max(...targets.map((t) => t.length));
  for (const key in object) {
    if (key.length <= longest && !names.includes(key) && targets.includes(goFold(key))) return key;
  }
  return undefined;
}

/** UTF-8 that refuses invalid bytes and keeps a byte-order mark (JSON.parse then refuses it). */
const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The strict parse the tool policy needs (see the top of this file); the refusal when there is none. */
export function parseRequestBody(body: Buffer): { readonly value: unknown } | { readonly refusal: JsonRpcErrorResponse } {
  let text: string;
  try {
    text = STRICT_UTF8.decode(body);
  } catch {
    return { refusal: errorResponse(null, PARSE_ERROR, "Parse error: the request body is not valid UTF-8.") };
  }
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return { refusal: errorResponse(null, PARSE_ERROR, "Parse error: the request body is not valid JSON.") };
  }
}

/** The tools/call requests of a parsed JSON-RPC body (one message or a batch), and what cannot be read. */
export function callsIn(body: unknown): RequestCalls {
  const batch = Array.isArray(body);
  const calls: ToolCall[] = [];
  const malformed: MalformedMessage[] = [];
  const toolLists: RequestId[] = [];
  const requestIds: RequestId[] = [];
  for (const message of batch ? (body as unknown[]) : [body]) {
    // Not an object: not a request the broker could misread (the MCP server refuses it).
    if (!isObject(message)) continue;
    const id = requestId(message);
    const ambiguous = ambiguousMember(message, MESSAGE_MEMBERS);
    if (ambiguous !== undefined) {
      malformed.push({
        id,
        code: INVALID_REQUEST,
        message: `Invalid Request: the member ${shown(ambiguous)} differs from a JSON-RPC member name only in case; send it as ${MESSAGE_MEMBERS.join(", ")}.`,
      });
      continue;
    }
    if (typeof message.method === "string" && id !== null) requestIds.push(id);
    if (message.method === "tools/list" && id !== null) toolLists.push(id);
    if (message.method !== "tools/call") continue;
    if (id === null) {
      malformed.push({ id, code: INVALID_REQUEST, message: "Invalid Request: a tools/call needs a string or number id." });
      continue;
    }
    const field = nameField(message.method)!;
    const params = isObject(message.params) ? message.params : undefined;
    const name = params?.[field];
    const twin = params && ambiguousMember(params, [field]);
    if (typeof name !== "string" || twin !== undefined) {
      malformed.push({
        id,
        code: INVALID_PARAMS,
        message:
          twin !== undefined
            ? `Invalid params: the member ${shown(twin)} differs only in case from params.${field}; name the tool in params.${field} alone.`
            : `Invalid params: a tools/call names its tool in params.${field}, a string.`,
      });
      continue;
    }
    calls.push({ id, tool: name });
  }
  return { batch, calls, malformed, toolLists, requestIds };
}

/** A call the policy refused, for the audit event and the metric (`rule` is never shown to the caller). */
export interface RefusedCall {
  readonly id: RequestId;
  readonly tool: string;
  readonly decision: Exclude<ToolDecision, { allowed: true }>;
}

export type RequestVerdict =
  /** Nothing refused: pass the request on as it came. */
  | { readonly kind: "forward" }
  /**
   * A call needs a scope the token lacks (and no call is refused outright): answer the whole
   * request with 403 insufficient_scope naming `scopes`, the challenge MCP clients step up on
   * (2025-11-25 authorization, "Scope Challenge Handling").
   */
  | { readonly kind: "insufficient-scope"; readonly scopes: readonly string[]; readonly calls: readonly RefusedCall[] }
  /**
   * Answer with `status` and `body` (one error, or one per request of a batch) and pass nothing
   * on. `refused` lists the calls the policy refused (empty when the body was malformed).
   */
  | {
      readonly kind: "answer";
      readonly status: 200 | 400;
      readonly body: JsonRpcErrorResponse | readonly JsonRpcErrorResponse[];
      readonly refused: readonly RefusedCall[];
    };

const FORWARD: RequestVerdict = { kind: "forward" };

/** What the caller is told of a refused tool: its name, and nothing of the rule. */
function notPermitted(tool: string): string {
  return `The tool ${shown(tool)} is not permitted for you; ask the operator of this MCP server if you need it.`;
}

/**
 * What to do with a request, given the policy's answer for each of its tools/call requests (a
 * batch's calls are decided one by one):
 * - a malformed message: 400, with an error for it (and the rest of its batch);
 * - a call refused outright (denied, or its `allow` does not admit the caller): 200, with its
 *   -32602 error; in a batch, every other request is answered too and nothing is passed on;
 * - else a call that needs a scope: 403 insufficient_scope with every scope missing;
 * - else forward.
 * Refusals outright come before scope: stepping up (a consent page) would not make the request pass.
 *
 * A batch with one refused call is refused whole rather than passed on without that call with
 * the answers merged: batches exist only in MCP 2025-03-26 (removed in 2025-06-18), none of the
 * SDK clients sends one (their Protocol.request sends single messages), and a partial pass would
 * need the body cut by bytes (re-serialising would round large numbers in tool arguments) and the
 * MCP server's JSON or SSE answer spliced with the broker's errors. The other requests get a
 * -32600 error that says why they were not sent; notifications in the batch are not sent either.
 */
export function decideCalls(policy: ToolPolicy, caller: ToolCaller, read: RequestCalls): RequestVerdict {
  if (read.malformed.length > 0) {
    return { kind: "answer", status: 400, body: answerAll(read, read.malformed, "a message the broker cannot read"), refused: [] };
  }
  const refused: RefusedCall[] = [];
  const scopes = new Set<string>();
  const needScope: RefusedCall[] = [];
  for (const call of read.calls) {
    const decision = policy.decide(call.tool, caller);
    if (decision.allowed) continue;
    if (decision.reason === "needs-scope") {
      scopes.add(decision.scope);
      needScope.push({ id: call.id, tool: call.tool, decision });
    } else refused.push({ id: call.id, tool: call.tool, decision });
  }
  if (refused.length > 0) {
    const errors = refused.map((r) => ({ id: r.id, code: TOOL_NOT_PERMITTED, message: notPermitted(r.tool) }));
    return { kind: "answer", status: 200, body: answerAll(read, errors, `a call of ${shown(refused[0]!.tool)}, which is not permitted for you`), refused };
  }
  if (needScope.length > 0) return { kind: "insufficient-scope", scopes: [...scopes].sort(), calls: needScope };
  return FORWARD;
}

/**
 * The answer to a refused body: the single message's error, or for a batch one error per request
 * in order (its own, or "not sent" for the requests refused with it), then the errors of messages
 * that are not among the requests (no usable id).
 */
function answerAll(read: RequestCalls, errors: readonly MalformedMessage[], because: string): JsonRpcErrorResponse | readonly JsonRpcErrorResponse[] {
  const own = (m: MalformedMessage) => errorResponse(m.id, m.code, m.message);
  if (!read.batch) return own(errors[0]!);
  const answers: JsonRpcErrorResponse[] = [];
  const answered = new Set<RequestId>();
  for (const id of read.requestIds) {
    if (answered.has(id)) continue;
    answered.add(id);
    const error = errors.find((e) => e.id === id);
    answers.push(
      error ? own(error) : errorResponse(id, INVALID_REQUEST, `Not sent: this batch also holds ${because}. Send the other requests again without it.`),
    );
  }
  for (const error of errors) if (error.id === null || !answered.has(error.id)) answers.push(own(error));
  return answers;
}
