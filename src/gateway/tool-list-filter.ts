// The answer side of permissions per tool: tools/list answers lose the tools this caller may not
// see (grants/tool-policy.ts `visible`), in a JSON body or an SSE stream, as they stream back.
// Only the answers to the request's tools/list ids are rewritten (their `result.tools`, and
// `cacheScope` below); every other byte — other events, comments, heartbeats, event ids, the
// answer's nextCursor — passes as it came, so pagination and resumption work page by page.
//
// SSE (WHATWG HTML "Server-sent events"): lines end in CRLF, LF or CR, which may be split across
// chunks; an event is the lines up to a blank line; its data is the `data` fields joined by LF.
// An event is held until its blank line (a client dispatches nothing sooner), except comment lines
// before its first field, which pass at once: heartbeats must reach the client while the MCP server
// is quiet. A JSON body is held until its end.
//
// Fail closed: an answer the filter cannot read is not passed on. One event, or a JSON body,
// larger than MAX_FILTERED_BYTES is replaced by a JSON-RPC error for the tools/list requests it
// may have answered; a body in a content coding (gzip…) is replaced by those errors whole.
import type { OutgoingHttpHeaders } from "node:http";
import { Transform, type TransformCallback } from "node:stream";
import { errorResponse, type JsonRpcErrorResponse, type RequestId } from "./tool-calls.ts";

/**
 * The most the filter holds of one event or one JSON body: 8 MiB. Tool lists are far smaller (the
 * benchmark's 200 tools, each with a paragraph of description and a schema, take 119 KiB), and a
 * server with more pages them (nextCursor); twice the broker's 4 MiB request limit
 * (CHECKED_BODY_BYTES) leaves room for schemas far larger while bounding what one request can
 * make the broker hold.
 */
export const MAX_FILTERED_BYTES = 8 * 1024 * 1024;

/** The error a tools/list request gets when its answer could not be filtered. */
export const LIST_NOT_FILTERED = -32603;

/**
 * Which answers to filter. For a POST, the request's tools/list ids (callsIn's `toolLists`), its
 * other request ids and whether it was a batch (what a JSON body replaced whole must answer).
 * `"get-stream"`: a GET stream. Resumed with Last-Event-ID (MCP 2025-03-26 to 2025-11-25; since
 * 2025-11-25 also how a client polls for the answers of a POST stream the server closed early), the
 * MCP server replays answers to earlier requests the broker no longer knows; without it, a server
 * must send no answers there, and one that does anyway is filtered all the same: every response
 * carrying `result.tools` is filtered on a GET stream.
 */
export type ListAnswers = { readonly toolLists: readonly RequestId[]; readonly requestIds: readonly RequestId[]; readonly batch: boolean } | "get-stream";

export interface ToolListFilterOptions {
  /** The MCP server's Content-Type: text/event-stream is read as SSE, anything else as one JSON body. */
  readonly contentType: string | undefined;
  /** The MCP server's Content-Encoding: any coding but identity makes the answer unreadable here. */
  readonly contentEncoding?: string | undefined;
  readonly answers: ListAnswers;
  /** Whether the caller may see the tool (ToolPolicy.visible for this caller). */
  readonly visible: (tool: string) => boolean;
  /** Told when an answer was withheld (too large, unreadable), for the log. */
  readonly onWithheld?: (reason: string) => void;
  /** Tests only: a smaller limit than MAX_FILTERED_BYTES. */
  readonly maxBytes?: number;
}

type Format = "json" | "sse" | "unreadable";

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === "object" && !Array.isArray(value);
const idKey = (id: RequestId): string => `${typeof id}:${id}`;

const CR = 0x0d;
const LF = 0x0a;
const COLON = 0x3a;
const SPACE = 0x20;
const BOM = Buffer.from([0xef, 0xbb, 0xbf]);
const DATA = Buffer.from("data");
const LF_BUFFER = Buffer.from("\n");
const TOOLS_MEMBER = Buffer.from('"tools"');
const ESCAPE = Buffer.from("\\u");

/** The answer's format, from the MCP server's response headers. */
export function answerFormat(contentType: string | undefined, contentEncoding: string | undefined): Format {
  const coding = (contentEncoding ?? "").trim().toLowerCase();
  if (coding !== "" && coding !== "identity") return "unreadable";
  return /^\s*text\/event-stream\s*(;|$)/i.test(contentType ?? "") ? "sse" : "json";
}

/**
 * A Transform the MCP server's answer is piped through on its way to the client. The body may
 * change length: send `filter.responseHeaders(headers)` instead of the MCP server's headers.
 */
export class ToolListFilter extends Transform {
  readonly format: Format;
  private readonly wanted: (id: unknown) => boolean;
  private readonly maxBytes: number;
  /** The tools/list ids whose answer passed (filtered), so a withheld answer errs only for the others. */
  private readonly answered = new Set<string>();

  // JSON: the body so far.
  private body: Buffer[] = [];
  private bodyBytes = 0;
  private ended = false;

  // SSE: the stream's start (a byte-order mark to pass before parsing), the line being read, a CR
  // that ended the last chunk (the next may start with its LF), the current event's lines.
  private head: Buffer | null = Buffer.alloc(0);
  private line: Buffer[] = [];
  private lineBytes = 0;
  private heldCR = false;
  private event: { raw: Buffer; length: number }[] = [];
  private eventBytes = 0;
  private eventHasField = false;
  /** The rest of an event too large to hold is dropped, up to its blank line. */
  private skipping = false;
  /** While skipping: the line being dropped has bytes (so its end is no blank line). */
  private skippedLineHasBytes = false;

  constructor(private readonly options: ToolListFilterOptions) {
    super();
    this.format = answerFormat(options.contentType, options.contentEncoding);
    this.maxBytes = options.maxBytes ?? MAX_FILTERED_BYTES;
    const { answers } = options;
    if (answers === "get-stream") this.wanted = (id) => typeof id === "string" || typeof id === "number";
    else {
      const ids = new Set(answers.toolLists.map(idKey));
      this.wanted = (id) => (typeof id === "string" || typeof id === "number") && ids.has(idKey(id));
    }
  }

  /**
   * The headers to send instead of `upstream`: without Content-Length (and the validators and
   * digests of the MCP server's bytes), since the body may change; for an unreadable answer, the
   * JSON error that replaces it.
   */
  responseHeaders(upstream: OutgoingHttpHeaders): OutgoingHttpHeaders {
    const headers: OutgoingHttpHeaders = { ...upstream };
    for (const name of ["content-length", "etag", "content-md5", "digest", "content-digest", "repr-digest"]) delete headers[name];
    if (this.format === "unreadable") {
      delete headers["content-encoding"];
      headers["content-type"] = "application/json";
    }
    return headers;
  }

  override _transform(chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.format === "sse") this.readSse(chunk);
    else if (this.format === "unreadable") this.withholdBody("the answer is compressed (Content-Encoding)");
    else if (!this.ended) {
      this.body.push(chunk);
      this.bodyBytes += chunk.length;
      if (this.bodyBytes > this.maxBytes) this.withholdBody(`the answer is larger than ${this.maxBytes} bytes`);
    }
    done();
  }

  override _flush(done: TransformCallback): void {
    if (this.format === "sse") this.endSse();
    else if (this.format === "unreadable") this.withholdBody("the answer is compressed (Content-Encoding)");
    else if (!this.ended) {
      const body = Buffer.concat(this.body);
      this.body = [];
      this.push(this.filtered(body) ?? body);
    }
    done();
  }

  /** Replaces the JSON body with errors for its requests, and drops the rest of it. */
  private withholdBody(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    this.body = [];
    this.options.onWithheld?.(reason);
    const { answers } = this.options;
    const message = withheldMessage(reason);
    let errors: JsonRpcErrorResponse | JsonRpcErrorResponse[];
    if (answers === "get-stream") errors = errorResponse(null, LIST_NOT_FILTERED, message);
    else {
      // The whole body is replaced: every request it answered gets an error, tools/list or not.
      const all = answers.requestIds.length > 0 ? answers.requestIds : answers.toolLists;
      errors = all.map((id) => errorResponse(id, LIST_NOT_FILTERED, message));
      if (!answers.batch && errors.length === 1) errors = errors[0]!;
    }
    this.push(JSON.stringify(errors));
    this.push(null);
  }

  /** The message (or batch) in `bytes` with hidden tools removed; undefined when nothing changes. */
  private filtered(bytes: Buffer): Buffer | undefined {
    let text = bytes.toString("utf8");
    // The Fetch API's response.json() (and EventSource) skip a byte-order mark, so must the filter.
    if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    // No "tools" member can hide in JSON text without the word itself or a \u escape.
    if (!text.includes('"tools"') && !text.includes("\\u")) return undefined;
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      return undefined; // the client cannot read it either
    }
    const rewritten = this.rewrite(message);
    return rewritten === undefined ? undefined : Buffer.from(JSON.stringify(rewritten));
  }

  /**
   * A response to a wanted id with its hidden tools removed (withoutHiddenTools), or a batch of
   * responses with theirs; undefined when nothing changes.
   */
  private rewrite(message: unknown): unknown {
    if (Array.isArray(message)) {
      let changed = false;
      const out = message.map((element) => {
        const next = this.rewrite(element);
        if (next === undefined) return element;
        changed = true;
        return next;
      });
      return changed ? out : undefined;
    }
    if (!isObject(message) || "method" in message || !this.wanted(message.id)) return undefined;
    if (!isObject(message.result) || !Array.isArray(message.result.tools)) return undefined;
    this.answered.add(idKey(message.id as RequestId));
    return withoutHiddenTools(message, this.options.visible);
  }

  // --- SSE ---

  private readSse(chunk: Buffer): void {
    if (this.head !== null) {
      // A byte-order mark starts the stream at most once; the parser skips it, and so must this one.
      const head = Buffer.concat([this.head, chunk]);
      if (head.length < BOM.length && BOM.subarray(0, head.length).equals(head)) {
        this.head = head;
        return;
      }
      this.head = null;
      if (head.subarray(0, BOM.length).equals(BOM)) {
        this.push(BOM);
        chunk = head.subarray(BOM.length);
      } else chunk = head;
    }
    let at = 0;
    if (this.heldCR && chunk.length > 0) {
      this.heldCR = false;
      if (chunk[0] === LF) {
        this.endLine(Buffer.from([CR, LF]));
        at = 1;
      } else this.endLine(Buffer.from([CR]));
    }
    // Where the next CR and LF are, each searched for once per chunk position passed (linear).
    let nextCR = -2;
    let nextLF = -2;
    while (at < chunk.length) {
      if (nextCR !== -1 && nextCR < at) nextCR = chunk.indexOf(CR, at);
      if (nextLF !== -1 && nextLF < at) nextLF = chunk.indexOf(LF, at);
      const end = nextCR === -1 ? nextLF : nextLF === -1 ? nextCR : Math.min(nextCR, nextLF);
      if (end === -1) {
        this.addToLine(chunk.subarray(at));
        return;
      }
      this.addToLine(chunk.subarray(at, end));
      if (chunk[end] === LF) {
        this.endLine(chunk.subarray(end, end + 1));
        at = end + 1;
      } else if (end + 1 === chunk.length) {
        // A CR that ends the chunk: whether an LF follows is for the next chunk to say.
        this.heldCR = true;
        return;
      } else if (chunk[end + 1] === LF) {
        this.endLine(chunk.subarray(end, end + 2));
        at = end + 2;
      } else {
        this.endLine(chunk.subarray(end, end + 1));
        at = end + 1;
      }
    }
  }

  private endSse(): void {
    // A stream shorter than a byte-order mark that began like one: its bytes are just bytes.
    const head = this.head;
    this.head = null;
    if (head !== null && head.length > 0) this.readSse(head);
    if (this.heldCR) {
      this.heldCR = false;
      this.endLine(Buffer.from([CR]));
    }
    if (this.skipping) return;
    // An unterminated last line, or an event without its blank line: clients drop it, but one that
    // dispatches it anyway must not see it unfiltered.
    if (this.lineBytes > 0) this.event.push(this.takeLine(Buffer.alloc(0)));
    if (this.event.length > 0) this.dispatch();
  }

  private addToLine(bytes: Buffer): void {
    if (bytes.length === 0) return;
    if (this.skipping) {
      this.skippedLineHasBytes = true;
      return;
    }
    this.line.push(bytes);
    this.lineBytes += bytes.length;
    if (this.eventBytes + this.lineBytes > this.maxBytes) {
      this.withholdEvent();
      this.skippedLineHasBytes = true;
    }
  }

  private takeLine(terminator: Buffer): { raw: Buffer; length: number } {
    const length = this.lineBytes;
    const raw = Buffer.concat([...this.line, terminator]);
    this.line = [];
    this.lineBytes = 0;
    return { raw, length };
  }

  private endLine(terminator: Buffer): void {
    if (this.skipping) {
      // Only a blank line ends the dropped event; its other lines go on being dropped.
      if (!this.skippedLineHasBytes) this.skipping = false;
      this.skippedLineHasBytes = false;
      return;
    }
    const line = this.takeLine(terminator);
    if (line.length === 0) {
      // A blank line: the end of an event, or a keep-alive between events.
      if (this.eventHasField) {
        this.event.push(line);
        this.dispatch();
      } else this.push(line.raw);
      return;
    }
    if (line.raw[0] === COLON && !this.eventHasField) {
      this.push(line.raw);
      return;
    }
    this.event.push(line);
    this.eventBytes += line.raw.length;
    if (line.raw[0] !== COLON) this.eventHasField = true;
    if (this.eventBytes > this.maxBytes) this.withholdEvent();
  }

  /** Passes the current event on, with its data rewritten when it answers a wanted tools/list. */
  private dispatch(): void {
    const lines = this.event;
    this.event = [];
    this.eventBytes = 0;
    this.eventHasField = false;
    const data: Buffer[] = [];
    let firstData = -1;
    lines.forEach((line, index) => {
      const value = dataValue(line.raw.subarray(0, line.length));
      if (value === undefined) return;
      if (firstData === -1) firstData = index;
      else data.push(LF_BUFFER);
      data.push(value);
    });
    // Most events (progress, logs, other answers) carry no "tools" member: passed in one piece
    // without decoding their data (a "tools" member cannot be written without the word or a \u).
    const candidate = data.some((value) => value.includes(TOOLS_MEMBER) || value.includes(ESCAPE));
    const rewritten = candidate ? this.filtered(Buffer.concat(data)) : undefined;
    if (rewritten === undefined) {
      this.push(lines.length === 1 ? lines[0]!.raw : Buffer.concat(lines.map((line) => line.raw)));
      return;
    }
    // The event's other lines (event, id, retry, comments) stay where they were; its data becomes
    // one line where the first was.
    lines.forEach((line, index) => {
      if (index === firstData) this.push(Buffer.concat([Buffer.from("data: "), rewritten, line.raw.subarray(line.length)]));
      else if (dataValue(line.raw.subarray(0, line.length)) === undefined) this.push(line.raw);
    });
  }

  /** Drops the event being read (too large to hold) and errs the tools/list requests it may answer. */
  private withholdEvent(): void {
    this.event = [];
    this.eventBytes = 0;
    this.eventHasField = false;
    this.line = [];
    this.lineBytes = 0;
    this.skipping = true;
    this.skippedLineHasBytes = false;
    const reason = `an event of the answer is larger than ${this.maxBytes} bytes`;
    this.options.onWithheld?.(reason);
    const { answers } = this.options;
    if (answers === "get-stream") return; // which request it answered is not known; nothing to err
    const message = withheldMessage(reason);
    for (const id of answers.toolLists) {
      if (this.answered.has(idKey(id))) continue;
      this.answered.add(idKey(id));
      this.push(`event: message\ndata: ${JSON.stringify(errorResponse(id, LIST_NOT_FILTERED, message))}\n\n`);
    }
  }
}

/**
 * A tools/list response (`result.tools`) without the tools `visible` refuses; undefined when
 * nothing changes or it holds no tool list. `cacheScope: "public"` becomes "private": the list now
 * depends on who asked, and MCP 2026-07-28 (server/utilities/caching) says filtered lists that
 * vary per user are "private" — a public one may be shared across access tokens. Tools without a
 * string name are dropped: the policy cannot tell whether this caller may see them. The one rule
 * for both backends: the HTTP proxy's byte filter above and the stdio bridge's answers.
 */
export function withoutHiddenTools<M extends Record<string, unknown>>(message: M, visible: (tool: string) => boolean): M | undefined {
  const result = message.result;
  if (!isObject(result) || !Array.isArray(result.tools)) return undefined;
  const tools = result.tools.filter((tool: unknown) => isObject(tool) && typeof tool.name === "string" && visible(tool.name));
  const privatise = result.cacheScope === "public";
  if (tools.length === result.tools.length && !privatise) return undefined;
  return { ...message, result: { ...result, tools, ...(privatise ? { cacheScope: "private" } : {}) } };
}

/** The value of a `data` field line (after "data:" and one optional space); undefined for other lines. */
function dataValue(line: Buffer): Buffer | undefined {
  const colon = line.indexOf(COLON);
  const name = colon === -1 ? line : line.subarray(0, colon);
  if (!name.equals(DATA)) return undefined;
  if (colon === -1) return Buffer.alloc(0);
  const start = line[colon + 1] === SPACE ? colon + 2 : colon + 1;
  return line.subarray(start);
}

function withheldMessage(reason: string): string {
  return `The MCP server's tools/list answer was withheld: ${reason}, and the broker must filter it by your permissions. Ask the operator (the MCP server should page its tool list).`;
}
