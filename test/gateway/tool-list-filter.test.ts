// tools/list answers filtered by the caller's tool permissions as they stream back, in a JSON body
// or an SSE stream cut anywhere: only the answers to the request's tools/list ids change (their
// tools, and a public cacheScope), every other byte passes as it came, and what the filter cannot
// read is withheld rather than passed on unfiltered.
import { through } from "../support/stream-through.ts";
import { describe, expect, it } from "@jest/globals";
import type { AccessRules } from "../../src/config/catalogue.ts";
import { type ToolCaller, ToolPolicy } from "../../src/grants/tool-policy.ts";
import { type ListAnswers, LIST_NOT_FILTERED, ToolListFilter, type ToolListFilterOptions } from "../../src/gateway/tool-list-filter.ts";

const NOBODY: AccessRules = { users: [], emailDomains: [], githubOrgs: [], groups: [] };
const policy = new ToolPolicy([
  { match: "delete_*", allow: { ...NOBODY, groups: ["platform"] } },
  { match: "admin_*", deny: true },
  { match: "write_*", requireScope: "docs:write" },
]);
const bob: ToolCaller = { facts: { subject: "oidc:bob", login: "bob", groups: ["sales"] }, scopes: ["mcp"] };
const alice: ToolCaller = { facts: { subject: "oidc:alice", login: "alice", groups: ["platform"] }, scopes: ["mcp"] };
const HIDDEN_FROM_BOB = ["delete_page", "admin_reset"];

const tool = (name: string) => ({ name, description: `The ${name} tool`, inputSchema: { type: "object", properties: { id: { type: "string" } } } });
const TOOLS = ["search", "delete_page", "admin_reset", "write_page", "read_page"].map(tool);
const listAnswer = (id: string | number, result: Record<string, unknown> = {}) => ({
  jsonrpc: "2.0",
  id,
  result: { tools: TOOLS, nextCursor: "page-2", ...result },
});
/** What Bob may see of a list answer. */
const forBob = (answer: ReturnType<typeof listAnswer>) => ({
  ...answer,
  result: { ...answer.result, tools: (answer.result.tools as { name: string }[]).filter((t) => !HIDDEN_FROM_BOB.includes(t.name)) },
});

const request = (toolLists: (string | number)[], requestIds: (string | number)[] = toolLists, batch = false): ListAnswers => ({ toolLists, requestIds, batch });

function filterFor(who: ToolCaller, options: Partial<ToolListFilterOptions> & Pick<ToolListFilterOptions, "answers">): ToolListFilter {
  return new ToolListFilter({ contentType: "text/event-stream", visible: (name) => policy.visible(name, who), ...options });
}

/** `bytes` cut at every offset into two chunks, and once into single bytes. */
function* everySplit(bytes: Buffer): Generator<Buffer[]> {
  for (let at = 0; at <= bytes.length; at++) yield [bytes.subarray(0, at), bytes.subarray(at)];
  yield Array.from(bytes, (byte) => Buffer.from([byte]));
}

describe("JSON answers", () => {
  const json = (who: ToolCaller, answers: ListAnswers, extra: Partial<ToolListFilterOptions> = {}) =>
    filterFor(who, { contentType: "application/json; charset=utf-8", answers, ...extra });

  it("removes the tools the caller may not see, keeps the rest and nextCursor", async () => {
    const out = await through(json(bob, request([1])), [Buffer.from(JSON.stringify(listAnswer(1)))]);
    expect(JSON.parse(out.toString())).toEqual(forBob(listAnswer(1)));
  });

  it("a tool that only needs a scope stays listed (the client steps up when it calls it)", async () => {
    const out = JSON.parse((await through(json(bob, request([1])), [Buffer.from(JSON.stringify(listAnswer(1)))])).toString());
    expect(out.result.tools.map((t: { name: string }) => t.name)).toContain("write_page");
  });

  it("shows a caller inside allow what it may call", async () => {
    const out = JSON.parse((await through(json(alice, request([1])), [Buffer.from(JSON.stringify(listAnswer(1)))])).toString());
    expect(out.result.tools.map((t: { name: string }) => t.name)).toEqual(["search", "delete_page", "write_page", "read_page"]);
  });

  it("passes an answer with nothing to remove byte for byte (spacing, key order, number forms)", async () => {
    const body = Buffer.from('{ "jsonrpc":"2.0", "id":1, "result":{"tools":[{"name":"search","x":1.0e0}],"nextCursor":"c"} }\n');
    expect((await through(json(bob, request([1])), [body])).equals(body)).toBe(true);
  });

  it("leaves answers to other ids alone, even when they carry a tools array", async () => {
    const body = Buffer.from(JSON.stringify({ jsonrpc: "2.0", id: 2, result: { tools: TOOLS } }));
    expect((await through(json(bob, request([1], [1, 2])), [body])).equals(body)).toBe(true);
    // Ids are compared with their type: the string "1" is not the number 1.
    const text = Buffer.from(JSON.stringify(listAnswer("1")));
    expect((await through(json(bob, request([1])), [text])).equals(text)).toBe(true);
  });

  it("filters each tools/list answer of a batch and leaves the other answers", async () => {
    const other = { jsonrpc: "2.0", id: "call", result: { content: [{ type: "text", text: "admin_reset" }] } };
    const body = [listAnswer("a"), other, listAnswer("b", { nextCursor: undefined })];
    const out = await through(json(bob, request(["a", "b"], ["a", "call", "b"], true)), [Buffer.from(JSON.stringify(body))]);
    expect(JSON.parse(out.toString())).toEqual([forBob(listAnswer("a")), other, forBob(listAnswer("b", { nextCursor: undefined }))]);
  });

  it("makes a public cacheScope private: the list now depends on who asked", async () => {
    const page = listAnswer(1, { ttlMs: 60_000, cacheScope: "public" });
    const out = JSON.parse((await through(json(alice, request([1])), [Buffer.from(JSON.stringify(page))])).toString());
    expect(out.result).toMatchObject({ ttlMs: 60_000, cacheScope: "private", nextCursor: "page-2" });
    const kept = Buffer.from(JSON.stringify(listAnswer(1, { cacheScope: "private" }).result.tools.slice(0, 1)));
    const privatePage = Buffer.from(`{"jsonrpc":"2.0","id":1,"result":{"tools":${kept},"cacheScope":"private"}}`);
    expect((await through(json(alice, request([1])), [privatePage])).equals(privatePage)).toBe(true);
  });

  it("drops a listed tool without a string name: nobody can tell whether the caller may see it", async () => {
    const body = { jsonrpc: "2.0", id: 1, result: { tools: [tool("search"), { description: "no name" }, { name: 7 }] } };
    const out = JSON.parse((await through(json(bob, request([1])), [Buffer.from(JSON.stringify(body))])).toString());
    expect(out.result.tools).toEqual([tool("search")]);
  });

  it("sees through a byte-order mark and an escaped member name, as the client's parser does", async () => {
    const bom = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify(listAnswer(1)))]);
    const escaped = Buffer.from(JSON.stringify(listAnswer(1)).replace('"tools"', '"\\u0074ools"'));
    for (const body of [bom, escaped]) {
      const out = (await through(json(bob, request([1])), [body])).toString();
      expect(JSON.parse(out)).toEqual(forBob(listAnswer(1)));
    }
  });

  it("a body that is no JSON passes as it is (the client cannot read it either)", async () => {
    const body = Buffer.from('{"jsonrpc":"2.0","id":1,"result":{"tools":[{"name":"admin_reset"}]');
    expect((await through(json(bob, request([1])), [body])).equals(body)).toBe(true);
  });

  it("cut into chunks anywhere, gives the same answer", async () => {
    const body = Buffer.from(JSON.stringify(listAnswer(1)));
    const whole = await through(json(bob, request([1])), [body]);
    for (const chunks of everySplit(body)) expect((await through(json(bob, request([1])), chunks)).equals(whole)).toBe(true);
  });

  it("a body over the limit fails closed: an error for every request it answered, nothing of the list", async () => {
    const withheld: string[] = [];
    const body = Buffer.from(JSON.stringify([listAnswer(1), { jsonrpc: "2.0", id: 2, result: {} }]));
    const filter = json(bob, request([1], [1, 2], true), { maxBytes: 200, onWithheld: (reason) => withheld.push(reason) });
    const out = JSON.parse((await through(filter, [body.subarray(0, 150), body.subarray(150)])).toString());
    expect(out).toEqual([1, 2].map((id) => ({ jsonrpc: "2.0", id, error: { code: LIST_NOT_FILTERED, message: expect.stringContaining("withheld") } })));
    expect(withheld).toEqual(["the answer is larger than 200 bytes"]);
    const single = await through(json(bob, request([1]), { maxBytes: 200 }), [Buffer.from(JSON.stringify(listAnswer(1)))]);
    expect(JSON.parse(single.toString())).toMatchObject({ id: 1, error: { code: LIST_NOT_FILTERED } });
  });

  it("a compressed answer is unreadable here: replaced by the error, with headers to match", async () => {
    const filter = json(bob, request([1]), { contentEncoding: "gzip" });
    expect(filter.responseHeaders({ "content-type": "application/json", "content-encoding": "gzip", "content-length": "99" })).toEqual({
      "content-type": "application/json",
    });
    const out = JSON.parse((await through(filter, [Buffer.from([0x1f, 0x8b, 0x08, 0x00])])).toString());
    expect(out).toMatchObject({ id: 1, error: { code: LIST_NOT_FILTERED } });
  });

  it("the headers lose what describes the MCP server's bytes, and keep the rest", () => {
    const filter = json(bob, request([1]));
    expect(filter.responseHeaders({ "content-type": "application/json", "content-length": "1234", etag: '"x"', "mcp-session-id": "s" })).toEqual({
      "content-type": "application/json",
      "mcp-session-id": "s",
    });
  });
});

describe("SSE answers", () => {
  const listEvent = (id: number | string, lineEnd: string) => {
    // The answer's JSON split over two data lines (the client joins them with LF: JSON whitespace).
    const json = JSON.stringify(listAnswer(id));
    const [head, tail] = [json.slice(0, json.indexOf('"tools"')), json.slice(json.indexOf('"tools"'))];
    return `id: ev-3${lineEnd}event: message${lineEnd}data: ${head}${lineEnd}data:${tail}${lineEnd}${lineEnd}`;
  };
  /** A stream with a comment, a retry, a notification and another id's answer (both mentioning tools), a heartbeat, then the list. */
  const sample = (lineEnd: string) => {
    const other = JSON.stringify({ jsonrpc: "2.0", id: 7, result: { tools: [tool("admin_other")] } });
    const progress = JSON.stringify({ jsonrpc: "2.0", method: "notifications/progress", params: { progressToken: 1, message: '"tools" are coming' } });
    const before = [
      `: connected${lineEnd}${lineEnd}`,
      `retry: 3000${lineEnd}${lineEnd}`,
      `id: ev-1${lineEnd}event: message${lineEnd}data: ${progress}${lineEnd}${lineEnd}`,
      `:heartbeat${lineEnd}`,
      `id: ev-2${lineEnd}data: ${other}${lineEnd}${lineEnd}`,
    ].join("");
    const after = `${lineEnd}: bye${lineEnd}id: ev-4${lineEnd}data: ${progress}${lineEnd}${lineEnd}`;
    return { before, list: listEvent(1, lineEnd), after };
  };
  /** The list event as the filter writes it: its data one line where the first was, the other lines kept. */
  const filteredListEvent = (lineEnd: string, answer: unknown = forBob(listAnswer(1))) =>
    `id: ev-3${lineEnd}event: message${lineEnd}data: ${JSON.stringify(answer)}${lineEnd}${lineEnd}`;

  it.each([
    ["LF", "\n"],
    ["CRLF", "\r\n"],
    ["CR", "\r"],
  ])("with %s line ends, cut anywhere: the list event filtered, every other byte as it came", async (_name, lineEnd) => {
    const { before, list, after } = sample(lineEnd);
    const stream = Buffer.from(before + list + after);
    const expected = before + filteredListEvent(lineEnd) + after;
    for (const chunks of everySplit(stream)) {
      const out = (await through(filterFor(bob, { answers: request([1], [1, 7]) }), chunks)).toString();
      expect(out).toBe(expected);
      for (const name of HIDDEN_FROM_BOB) expect(out).not.toContain(name);
    }
  });

  it("passes comments and heartbeats at once, and holds an event only until its blank line", async () => {
    const filter = filterFor(bob, { answers: request([1]) });
    const out: string[] = [];
    filter.on("data", (chunk: Buffer) => out.push(chunk.toString()));
    const write = (text: string) => new Promise((resolve) => filter.write(Buffer.from(text), resolve));
    await write(": ping\n");
    expect(out.join("")).toBe(": ping\n");
    await write(`data: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/message", params: {} })}\n`);
    expect(out.join("")).toBe(": ping\n");
    await write("\n");
    expect(out.join("")).toMatch(/notifications\/message.*\n\n$/);
  });

  it("filters every page of a paginated list, keeping each cursor; a page left empty keeps its cursor too", async () => {
    const page2 = { jsonrpc: "2.0", id: 2, result: { tools: [tool("admin_a"), tool("delete_b")], nextCursor: "page-3" } };
    const stream = `data: ${JSON.stringify(listAnswer(1))}\n\ndata: ${JSON.stringify(page2)}\n\n`;
    const out = (await through(filterFor(bob, { answers: request([1, 2]) }), [Buffer.from(stream)])).toString();
    const events = out
      .split("\n\n")
      .filter(Boolean)
      .map((e) => JSON.parse(e.slice("data: ".length)));
    expect(events).toEqual([forBob(listAnswer(1)), { ...page2, result: { tools: [], nextCursor: "page-3" } }]);
  });

  it("a batch of answers in one event: each tools/list answer filtered", async () => {
    const other = { jsonrpc: "2.0", id: 5, result: {} };
    const stream = `event: message\ndata: ${JSON.stringify([listAnswer(1), other])}\n\n`;
    const out = (await through(filterFor(bob, { answers: request([1], [1, 5], true) }), [Buffer.from(stream)])).toString();
    expect(out).toBe(`event: message\ndata: ${JSON.stringify([forBob(listAnswer(1)), other])}\n\n`);
  });

  it("a byte-order mark opening the stream, even cut in two, passes and hides nothing", async () => {
    const stream = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`data: ${JSON.stringify(listAnswer(1))}\n\n`)]);
    const expected = Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(`data: ${JSON.stringify(forBob(listAnswer(1)))}\n\n`)]);
    for (const at of [1, 2, 3, 4]) {
      const out = await through(filterFor(bob, { answers: request([1]) }), [stream.subarray(0, at), stream.subarray(at)]);
      expect(out.equals(expected)).toBe(true);
    }
    // A stream too short to be more than the start of a mark is passed as it is.
    expect((await through(filterFor(bob, { answers: request([1]) }), [Buffer.from([0xef, 0xbb])])).equals(Buffer.from([0xef, 0xbb]))).toBe(true);
  });

  it("an event the stream ends without its blank line is still filtered (a lenient client may dispatch it)", async () => {
    const out = (await through(filterFor(bob, { answers: request([1]) }), [Buffer.from(`data: ${JSON.stringify(listAnswer(1))}`)])).toString();
    expect(out).toBe(`data: ${JSON.stringify(forBob(listAnswer(1)))}`);
  });

  it("a data field without a colon or a space after it counts as the clients count it", async () => {
    const json = JSON.stringify(listAnswer(1));
    const stream = `data\ndata:${json}\n\n`; // "" and the JSON: joined by LF, still JSON
    const out = (await through(filterFor(bob, { answers: request([1]) }), [Buffer.from(stream)])).toString();
    expect(JSON.parse(out.slice("data: ".length))).toEqual(forBob(listAnswer(1)));
  });

  it("an event over the limit fails closed: an error for the list, the rest of the event dropped, the stream going on", async () => {
    const withheld: string[] = [];
    const notification = `data: ${JSON.stringify({ jsonrpc: "2.0", method: "notifications/message", params: { level: "info" } })}\n\n`;
    const stream = Buffer.from(`: hi\n\n${listEvent(1, "\n")}${notification}`);
    for (const chunks of everySplit(stream)) {
      const filter = filterFor(bob, { answers: request([1]), maxBytes: 200, onWithheld: (reason) => withheld.push(reason) });
      const out = (await through(filter, chunks)).toString();
      const [head, errorEvent, tail] = [out.slice(0, 6), out.slice(6, out.length - notification.length), out.slice(out.length - notification.length)];
      expect(head).toBe(": hi\n\n");
      expect(errorEvent).toMatch(/^event: message\ndata: .*\n\n$/);
      expect(JSON.parse(errorEvent.slice("event: message\ndata: ".length))).toMatchObject({ id: 1, error: { code: LIST_NOT_FILTERED } });
      expect(tail).toBe(notification);
      for (const name of [...HIDDEN_FROM_BOB, "search"]) expect(out).not.toContain(name);
    }
    expect(new Set(withheld)).toEqual(new Set(["an event of the answer is larger than 200 bytes"]));
  });

  it("a GET stream (resumed with Last-Event-ID): any replayed answer carrying tools is filtered", async () => {
    const replay = `id: old-9\ndata: ${JSON.stringify(listAnswer("from-another-request"))}\n\n`;
    const plain = `data: ${JSON.stringify({ jsonrpc: "2.0", id: 3, result: { content: [] } })}\n\n`;
    const request = { jsonrpc: "2.0", id: 4, method: "sampling/createMessage", params: { tools: [tool("admin_reset")] } };
    const serverRequest = `data: ${JSON.stringify(request)}\n\n`;
    const out = (await through(filterFor(bob, { answers: "get-stream" }), [Buffer.from(replay + plain + serverRequest)])).toString();
    expect(out).toBe(`id: old-9\ndata: ${JSON.stringify(forBob(listAnswer("from-another-request")))}\n\n${plain}${serverRequest}`);
  });
});

// Who must not see a tool: a caller outside its allow, or anyone for a denied tool, in either format.
describe("a caller outside allow never sees the tool", () => {
  it.each([
    ["application/json", (body: string) => body],
    ["text/event-stream", (body: string) => `event: message\ndata: ${body}\n\n`],
  ])("in %s", async (contentType, frame) => {
    const body = Buffer.from(frame(JSON.stringify(listAnswer(1))));
    for (const chunks of everySplit(body)) {
      const out = (await through(filterFor(bob, { contentType, answers: request([1]) }), chunks)).toString();
      for (const name of HIDDEN_FROM_BOB) expect(out).not.toContain(name);
      expect(out).toContain("search");
    }
    const aliceSees = (await through(filterFor(alice, { contentType, answers: request([1]) }), [body])).toString();
    expect(aliceSees).toContain("delete_page");
    expect(aliceSees).not.toContain("admin_reset");
  });
});
