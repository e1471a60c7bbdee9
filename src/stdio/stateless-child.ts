// A warm stdio child serving MCP 2026-07-28 (stateless) requests of one grant. The child speaks an
// earlier revision: the bridge initializes it once, as a client offering the newest revision with
// a handshake and no client capabilities (a stateless client cannot be sent sampling, elicitation
// or roots requests), and keeps the revision the child chose. Then each HTTP request is one
// JSON-RPC request on the child's stdin with an id of the bridge's own, its answer translated to
// 2026-07-28 (modern-era.ts) and written as that request's reply (stateless-reply.ts).
//
// - Progress goes to the reply of the request whose progressToken it carries (as SSE, when the
//   client takes it). Everything else the child sends by itself (log messages, list changes) has
//   no request to go to in this era and is dropped; requests of its own (sampling…) are answered
//   with an error at once, so that the child does not wait for them.
// - A reply the client closes cancels the request in the child (notifications/cancelled), as
//   2026-07-28 says closing the stream does. A request not answered by the deadline gets an error
//   and is cancelled too. The child's stdout is throttled by the replies (throttle.ts).
// - The child is reaped like a session's: idle for MCP_STDIO_IDLE_SECONDS, its grant revoked, its
//   upstream token renewed (retired: it ends once its last request is answered), the broker
//   stopping. Who may use it is decided by the registry: only requests of its own grant.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../logger.ts";
import type { StdioChild } from "./child-process.ts";
import { ChildHolder, type ChildHolderOptions, type ListAnswerFilter, type SessionOwner } from "./child-holder.ts";
import {
  type ChildDescription,
  describeChild,
  discoverResult,
  type Json,
  legacyParams,
  modernError,
  modernResult,
  NEWEST_LEGACY_VERSION,
} from "./modern-era.ts";
import { Reply } from "./stateless-reply.ts";

interface Pending {
  readonly method: string;
  /** The client's progress token: on stdin the request's own id replaces it (unique in the child). */
  readonly progressToken: unknown;
  /** Clock time the request reached the child: its deadline counts from here. */
  readonly since: number;
  /** The child's answer (or the bridge's error in its place), as the child would send it. */
  answer(message: Json): void;
  progress(message: Json): void;
}

/** The child did not complete the handshake: it is not an MCP server the bridge can use. */
export class HandshakeFailed extends Error {}

const INTERNAL_ERROR = -32603;
const METHOD_NOT_FOUND = -32601;

export class StatelessChild extends ChildHolder<Pending> {
  private description: ChildDescription | undefined;
  private readonly replies = new Set<ServerResponse>();
  private nextId = 1;
  private retired = false;

  constructor(child: StdioChild, owner: SessionOwner, log: Logger, now: () => number, options: ChildHolderOptions) {
    super(child, owner, log, now, options, () => this.replies);
    child.onmessage = (message) => this.fromChild(message as unknown as Json);
  }

  /** The revision the child chose in the handshake. */
  get childProtocolVersion(): string | undefined {
    return this.description?.protocolVersion;
  }

  /** initialize, then notifications/initialized. Throws HandshakeFailed. */
  async initialize(clientInfo: unknown): Promise<void> {
    const answer = await new Promise<Json>((resolve) =>
      this.request("initialize", { protocolVersion: NEWEST_LEGACY_VERSION, capabilities: {}, clientInfo }, { answer: resolve, progress: () => undefined }),
    );
    this.description = answer.error === undefined ? describeChild(answer.result) : undefined;
    if (!this.description) {
      const why = answer.error === undefined ? "its answer to initialize is not an initialize result" : JSON.stringify(answer.error).slice(0, 200);
      throw new HandshakeFailed(`the MCP server did not complete initialize: ${why}`);
    }
    this.child.send({ jsonrpc: "2.0", method: "notifications/initialized" });
    this.log.info({ protocolVersion: this.description.protocolVersion }, "stdio MCP server initialized for stateless (MCP 2026-07-28) requests");
  }

  /** Answers server/discover from what the child said of itself. */
  discover(id: unknown, res: ServerResponse, accept: string | undefined): void {
    this.lastActive = this.now();
    new Reply(res, accept).finish({ jsonrpc: "2.0", id, result: discoverResult(this.description!) });
  }

  /**
   * Serves one request; resolves when its reply has ended (answered, or closed by the client).
   * `listAnswer`: the front end's filter of a tools/list answer for this caller.
   */
  async serve(message: Json, req: IncomingMessage, res: ServerResponse, listAnswer?: ListAnswerFilter): Promise<void> {
    this.lastActive = this.now();
    // The client left while its child was being started: nothing to ask the child.
    if (res.destroyed) return;
    const method = message.method as string;
    const reply = new Reply(res, req.headers.accept);
    const ended = new Promise<void>((resolve) => res.once("close", resolve));
    this.replies.add(res);
    const childId = this.request(method, legacyParams(message.params), {
      answer: (answer) => {
        const out: Json = { jsonrpc: "2.0", id: message.id };
        if (answer.error !== undefined) out.error = modernError(answer.error);
        else out.result = modernResult(method, answer.result, this.description?.serverInfo);
        const shown = method === "tools/list" && listAnswer ? listAnswer(out) : out;
        // A method the server does not have is 404 in this revision (a legacy endpoint's 404 has no JSON-RPC body).
        reply.finish(shown, (out.error as Json | undefined)?.code === METHOD_NOT_FOUND ? 404 : 200);
        this.throttle.check();
      },
      progress: (notification) => {
        if (reply.notify(notification)) this.throttle.check();
      },
      // Several clients of one grant share the child: their tokens may collide, the bridge's ids do not.
      rewritesProgressToken: true,
    });
    res.once("close", () => {
      this.replies.delete(res);
      // Closing the reply's stream cancels the request (2026-07-28 transport).
      if (this.pending.has(childId)) this.cancel(childId, "the client closed the request's stream");
    });
    await ended;
  }

  /** A newer upstream token exists: serve nothing new, end once the requests in flight are answered. */
  retire(): void {
    this.retired = true;
    if (this.idle) void this.end("the upstream token was renewed");
  }

  get isRetired(): boolean {
    return this.retired;
  }

  private request(method: string, params: unknown, handlers: Pick<Pending, "answer" | "progress"> & { readonly rewritesProgressToken?: boolean }): number {
    const childId = this.nextId++;
    const meta = (params as { _meta?: Json } | undefined)?._meta;
    const progressToken = meta?.progressToken;
    if (progressToken !== undefined && handlers.rewritesProgressToken) params = { ...(params as Json), _meta: { ...meta, progressToken: childId } };
    this.pending.set(childId, { method, progressToken, since: this.now(), answer: handlers.answer, progress: handlers.progress });
    const sent = this.child.send({ jsonrpc: "2.0", id: childId, method, ...(params === undefined ? {} : { params }) } as JSONRPCMessage);
    if (!sent) this.settle(childId, { error: { code: INTERNAL_ERROR, message: "The MCP server process has ended." } });
    return childId;
  }

  private fromChild(m: Json): void {
    if (typeof m.method !== "string") {
      if (typeof m.id === "number" && this.pending.has(m.id)) this.settle(m.id, m);
      else this.log.debug("stdio MCP server answered a request nobody is waiting for; dropped");
      return;
    }
    if ("id" in m) {
      // The child's own request: a stateless client can be asked nothing (no capabilities were
      // offered); a ping is answered, anything else refused at once so that nothing waits on it.
      this.child.send(
        (m.method === "ping"
          ? { jsonrpc: "2.0", id: m.id, result: {} }
          : {
              jsonrpc: "2.0",
              id: m.id,
              error: { code: METHOD_NOT_FOUND, message: `${m.method} is not available: the client speaks MCP 2026-07-28 through a stateless bridge.` },
            }) as JSONRPCMessage,
      );
      return;
    }
    const params = m.params as Json | undefined;
    const owner = m.method === "notifications/progress" && typeof params?.progressToken === "number" ? this.pending.get(params.progressToken) : undefined;
    if (owner?.progressToken !== undefined) {
      owner.progress({ ...m, params: { ...params, progressToken: owner.progressToken } });
      return;
    }
    this.log.debug({ method: m.method }, "stdio MCP server notification with no stateless request to go to; dropped");
  }

  private settle(childId: number, answer: Json): void {
    const pending = this.pending.get(childId);
    if (!pending) return;
    this.pending.delete(childId);
    this.lastActive = this.now();
    pending.answer(answer);
    if (this.retired && this.idle) void this.end("the upstream token was renewed");
  }

  private cancel(childId: number, reason: string): void {
    this.child.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: childId, reason } });
    const pending = this.pending.get(childId);
    if (!pending) return;
    this.pending.delete(childId);
    if (this.retired && this.idle) void this.end("the upstream token was renewed");
  }

  protected override expire(childId: number): void {
    const pending = this.pending.get(childId);
    if (!pending || this.ended) return;
    const { reason, error } = this.overdue(pending.method);
    this.child.send({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: childId, reason } });
    this.settle(childId, { error });
  }

  /** Requests in flight get an error; nothing else stays open in this era. */
  protected override abandon(reason: string): void {
    for (const childId of [...this.pending.keys()]) {
      this.settle(childId, { error: { code: INTERNAL_ERROR, message: `The MCP server process ended: ${reason}.` } });
    }
  }
}
