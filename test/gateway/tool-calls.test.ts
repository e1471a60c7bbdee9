// The request side of permissions per tool: which tools a JSON-RPC body calls, what the broker
// refuses to pass on because it cannot read it as every MCP server would, and the verdict for a
// whole request (pass on, 403 insufficient_scope, or the broker's own JSON-RPC errors).
import { describe, expect, it } from "@jest/globals";
import type { AccessRules, ToolRule } from "../../src/config/catalogue.ts";
import { type ToolCaller, ToolPolicy } from "../../src/grants/tool-policy.ts";
import { headerMismatch } from "../../src/gateway/header-consistency.ts";
import {
  callsIn,
  decideCalls,
  INVALID_REQUEST,
  type JsonRpcErrorResponse,
  PARSE_ERROR,
  parseRequestBody,
  TOOL_NOT_PERMITTED,
} from "../../src/gateway/tool-calls.ts";

const NOBODY: AccessRules = { users: [], emailDomains: [], githubOrgs: [], groups: [] };
const RULES: ToolRule[] = [
  { match: "delete_*", allow: { ...NOBODY, groups: ["platform"] } },
  { match: "admin_*", deny: true },
  { match: "write_*", requireScope: "docs:write" },
  { match: "*", requireScope: "docs:read" },
];
const policy = new ToolPolicy(RULES, { "docs:write": ["docs:read"] });
const alice: ToolCaller = { facts: { subject: "oidc:alice", login: "alice", groups: ["platform"] }, scopes: ["mcp", "docs:read"] };
const bob: ToolCaller = { facts: { subject: "oidc:bob", login: "bob", groups: ["sales"] }, scopes: ["mcp", "docs:read"] };

const call = (id: string | number | null | undefined, name: unknown, extra: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  ...(id === undefined ? {} : { id }),
  method: "tools/call",
  params: { name, arguments: {} },
  ...extra,
});
const list = (id: string | number) => ({ jsonrpc: "2.0", id, method: "tools/list", params: {} });
const notification = { jsonrpc: "2.0", method: "notifications/initialized" };
const verdict = (who: ToolCaller, body: unknown) => decideCalls(policy, who, callsIn(body));

describe("parseRequestBody: what the broker reads is what every server reads", () => {
  it("parses a JSON body", () => {
    expect(parseRequestBody(Buffer.from(JSON.stringify(call(1, "search"))))).toEqual({ value: call(1, "search") });
  });

  it.each([
    [
      "bytes that are not UTF-8",
      Buffer.concat([Buffer.from('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"dele'), Buffer.from([0xff]), Buffer.from('te_all"}}')]),
    ],
    // Python's json.loads(bytes) and others skip a byte-order mark; JSON.parse does not.
    ["a byte-order mark before the JSON", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(call(1, "admin_reset")))])],
    ["text that is not JSON", Buffer.from('{"method":"tools/call",}')],
  ])("refuses %s with -32700", (_what, body) => {
    const parsed = parseRequestBody(body);
    expect(parsed).toEqual({ refusal: { jsonrpc: "2.0", id: null, error: { code: PARSE_ERROR, message: expect.stringMatching(/^Parse error: /) } } });
  });
});

describe("callsIn", () => {
  it("reads the tool of a single tools/call", () => {
    expect(callsIn(call("a", "search"))).toEqual({ batch: false, calls: [{ id: "a", tool: "search" }], malformed: [], toolLists: [], requestIds: ["a"] });
  });

  it("reads every call of a batch, the tools/list ids and every request id, skipping notifications", () => {
    const read = callsIn([call(1, "search"), list(2), notification, call("3", "delete_page"), { jsonrpc: "2.0", id: 4, method: "ping" }]);
    expect(read).toEqual({
      batch: true,
      calls: [
        { id: 1, tool: "search" },
        { id: "3", tool: "delete_page" },
      ],
      malformed: [],
      toolLists: [2],
      requestIds: [1, 2, "3", 4],
    });
  });

  it("ignores what is no request: responses, non-objects, other methods", () => {
    expect(callsIn({ jsonrpc: "2.0", id: 7, result: {} })).toEqual({ batch: false, calls: [], malformed: [], toolLists: [], requestIds: [] });
    expect(callsIn([1, "x", null, []])).toMatchObject({ calls: [], malformed: [] });
    expect(callsIn(null)).toMatchObject({ calls: [], malformed: [] });
  });

  it.each<[string, unknown, number]>([
    ["without an id (a notification a server might still run)", call(undefined, "admin_reset"), INVALID_REQUEST],
    ["with a null id", call(null, "admin_reset"), INVALID_REQUEST],
    ["with an object id", call(undefined, "admin_reset", { id: { n: 1 } }), INVALID_REQUEST],
    ["without params", { jsonrpc: "2.0", id: 1, method: "tools/call" }, -32602],
    ["with a name that is no string", call(1, ["admin_reset"]), -32602],
    ["with params that are an array", { jsonrpc: "2.0", id: 1, method: "tools/call", params: ["admin_reset"] }, -32602],
  ])("reports a tools/call %s as malformed", (_what, message, code) => {
    const read = callsIn(message);
    expect(read.calls).toEqual([]);
    expect(read.malformed).toEqual([expect.objectContaining({ code })]);
  });

  // Go's encoding/json matched member names caselessly, and folded ſ to s and K to k
  // (modelcontextprotocol/go-sdk#805, GHSA-wvj2-96wp-fq3f): such a member is a second opinion.
  it.each<[string, unknown]>([
    ["Method beside method", { jsonrpc: "2.0", id: 1, method: "tools/list", Method: "tools/call", params: { name: "admin_reset" } }],
    ["METHOD alone", { jsonrpc: "2.0", id: 1, METHOD: "tools/call", params: { name: "admin_reset" } }],
    ["paramſ (LONG S)", { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "search" }, "param\u017f": { name: "admin_reset" } }],
    ["ıd (DOTLESS I)", { jsonrpc: "2.0", id: 1, "\u0131d": 2, method: "tools/call", params: { name: "search" } }],
    ["Name beside name in params", call(1, "search", { params: { name: "search", Name: "admin_reset" } })],
    ["NAME alone in params", call(1, "search", { params: { NAME: "admin_reset" } })],
  ])("reports %s as malformed", (_what, message) => {
    const read = callsIn(message);
    expect(read.calls).toEqual([]);
    expect(read.malformed).toHaveLength(1);
  });

  it("leaves members alone that only look alike: _meta, methods, names, other params", () => {
    const read = callsIn({ ...call(1, "search"), _meta: {}, methods: "x", params: { name: "search", names: [], arguments: { Name: "x" }, _meta: {} } });
    expect(read).toMatchObject({ calls: [{ id: 1, tool: "search" }], malformed: [] });
  });
});

/** The errors of an answer verdict, as a list. */
const errorsOf = (body: JsonRpcErrorResponse | readonly JsonRpcErrorResponse[]) => (Array.isArray(body) ? body : [body]) as JsonRpcErrorResponse[];

describe("decideCalls", () => {
  it("passes on what the policy allows", () => {
    expect(verdict(bob, call(1, "search"))).toEqual({ kind: "forward" });
    expect(verdict(alice, call(1, "delete_page"))).toEqual({ kind: "forward" });
    expect(verdict(bob, [call(1, "search"), list(2), notification])).toEqual({ kind: "forward" });
    expect(verdict(bob, list(1))).toEqual({ kind: "forward" });
  });

  it("a call refused outright: 200 with -32602 naming the tool, and nothing of the rule", () => {
    for (const [who, tool, reason] of [
      [bob, "delete_page", "not-allowed"],
      [alice, "admin_reset", "denied"],
    ] as const) {
      const result = verdict(who, call(9, tool));
      expect(result).toEqual({
        kind: "answer",
        status: 200,
        body: {
          jsonrpc: "2.0",
          id: 9,
          error: { code: TOOL_NOT_PERMITTED, message: `The tool "${tool}" is not permitted for you; ask the operator of this MCP server if you need it.` },
        },
        refused: [{ id: 9, tool, decision: expect.objectContaining({ reason }) }],
      });
      // The rule (its place, glob, groups) is for the audit log only.
      const message = JSON.stringify(result.kind === "answer" && result.body);
      for (const secret of ["platform", "#1", "#2", "delete_*", "admin_*", "group"]) expect(message).not.toContain(secret);
    }
  });

  it("bounds the tool name it echoes", () => {
    const result = verdict(bob, call(1, `admin_${"x".repeat(10_000)}`));
    expect(result.kind === "answer" && errorsOf(result.body)[0]!.error.message.length).toBeLessThan(300);
  });

  it("a call that needs a scope: 403 insufficient_scope with every scope missing", () => {
    const reader: ToolCaller = { ...bob, scopes: ["mcp"] };
    expect(verdict(reader, call(1, "read_page"))).toEqual({
      kind: "insufficient-scope",
      scopes: ["docs:read"],
      calls: [{ id: 1, tool: "read_page", decision: { allowed: false, reason: "needs-scope", scope: "docs:read", rule: "#4 *" } }],
    });
    const both = verdict(reader, [call(1, "write_page"), call(2, "read_page"), call(3, "write_other")]);
    expect(both).toMatchObject({ kind: "insufficient-scope", scopes: ["docs:read", "docs:write"] });
    // docs:write implies docs:read on this server: one scope asked.
    expect(verdict({ ...bob, scopes: ["mcp", "docs:write"] }, call(1, "read_page"))).toEqual({ kind: "forward" });
  });

  it("a batch with one refused call: every request answered, nothing passed on", () => {
    const result = verdict(bob, [call(1, "search"), notification, call(2, "delete_page"), list("l"), call(3, "write_page")]);
    expect(result).toMatchObject({ kind: "answer", status: 200, refused: [{ id: 2, tool: "delete_page" }] });
    const errors = result.kind === "answer" ? errorsOf(result.body) : [];
    expect(errors.map((e) => [e.id, e.error.code])).toEqual([
      [1, INVALID_REQUEST],
      [2, TOOL_NOT_PERMITTED],
      ["l", INVALID_REQUEST],
      [3, INVALID_REQUEST],
    ]);
    expect(errors[0]!.error.message).toBe(
      'Not sent: this batch also holds a call of "delete_page", which is not permitted for you. Send the other requests again without it.',
    );
  });

  it("refused outright before any step-up: a consent page would not make the batch pass", () => {
    const result = verdict({ ...bob, scopes: ["mcp"] }, [call(1, "read_page"), call(2, "admin_reset")]);
    expect(result).toMatchObject({ kind: "answer", status: 200, refused: [{ id: 2 }] });
  });

  it("a malformed message: 400 with its error, and the rest of its batch not sent", () => {
    expect(verdict(alice, call(null, "search"))).toEqual({
      kind: "answer",
      status: 400,
      body: { jsonrpc: "2.0", id: null, error: { code: INVALID_REQUEST, message: "Invalid Request: a tools/call needs a string or number id." } },
      refused: [],
    });
    const batch = verdict(alice, [call(1, "search"), { jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "search", Name: "admin_reset" } }]);
    expect(batch.kind === "answer" && errorsOf(batch.body).map((e) => [e.id, e.error.code])).toEqual([
      [1, INVALID_REQUEST],
      [2, -32602],
    ]);
    expect(batch).toMatchObject({ status: 400 });
  });

  it("no rules: nothing to decide, whatever the body", () => {
    const open = new ToolPolicy([]);
    expect(decideCalls(open, bob, callsIn([call(1, "admin_reset"), call(2, "delete_page")]))).toEqual({ kind: "forward" });
  });
});

// Who must not get a refused tool: a caller outside its `allow`, however the request is dressed.
describe("a caller outside allow cannot call the tool in any form", () => {
  const modern = { "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call" };
  it.each<[string, unknown, Record<string, string>]>([
    ["a single call", call(1, "delete_page"), {}],
    ["a call in a batch", [call(1, "search"), call(2, "delete_page")], {}],
    ["a call whose Mcp-Name header names an allowed tool", call(1, "delete_page"), { ...modern, "mcp-name": "search" }],
    ["a call with the name twice, one in another case", call(1, "search", { params: { name: "search", nAme: "delete_page" } }), {}],
    ["a tools/list with a second method member", { jsonrpc: "2.0", id: 1, method: "tools/list", mEthod: "tools/call", params: { name: "delete_page" } }, {}],
    ["a call without an id", call(undefined, "delete_page"), {}],
  ])("%s", (_what, body, headers) => {
    // The front end's order: the header check, then the tool policy, on the same parsed body.
    const mismatch = headerMismatch(headers, body);
    const result = mismatch === undefined ? verdict(bob, body) : { kind: "answer" as const };
    expect(result.kind).toBe("answer");
    // And the body the broker parsed from bytes is what it decided on.
    expect(parseRequestBody(Buffer.from(JSON.stringify(body)))).toEqual({ value: body });
  });

  it("while a caller inside allow can", () => {
    expect(verdict(alice, call(1, "delete_page"))).toEqual({ kind: "forward" });
    expect(headerMismatch({ ...modern, "mcp-name": "delete_page" }, call(1, "delete_page"))).toBeUndefined();
  });
});
