// One MCP session over a stdio child: Streamable HTTP on the outside, carried by the MCP SDK's own
// server transport (sessions, SSE vs JSON, Accept and protocol-version checks, stream bookkeeping),
// newline-delimited JSON-RPC on the child's stdin/stdout inside. What the SDK cannot know is what
// the bridge adds: which HTTP stream a message from the child belongs to, since stdio carries no
// such link.
//
// - Client requests get ids of the bridge's own on stdin (a counter), mapped back on the answer:
//   two POSTs reusing an id never collide inside the child.
// - Progress goes to the stream of the request whose progressToken it carries; a cancellation to
//   the stream of the request it cancels.
// - Everything else the child sends by itself (sampling, elicitation, roots/list, log messages,
//   list changes) goes to the open GET stream, or when there is none to the newest request stream
//   still open, so that a client that never opened GET still sees a sampling request its tool
//   call waits on.
// - A request the child has not answered within the deadline gets a JSON-RPC error, and the child
//   a notifications/cancelled for it: a hung child does not hold a request open forever.
// - Backpressure: when a stream of the session has more queued than its socket takes (the client
//   reads slowly, or not at all), the child's stdout is no longer read until it drains. The
//   child's writes then wait, instead of the broker buffering whatever the child writes.
import type { IncomingMessage, ServerResponse } from "node:http";
import { randomBytes } from "node:crypto";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import type { JSONRPCMessage, RequestId } from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../logger.ts";
import type { StdioChild } from "./child-process.ts";
import { ChildHolder, type ChildHolderOptions, type ListAnswerFilter, type SessionOwner } from "./child-holder.ts";

type Json = Record<string, unknown>;

interface PendingRequest {
  readonly clientId: RequestId;
  readonly method: string;
  readonly progressToken: string | undefined;
  /** Clock time the request reached the child: its deadline counts from here. */
  readonly since: number;
}

/** A message the bridge rewrote (an id, a request id): still the message it was. */
const rewritten = (value: Json): JSONRPCMessage => value as unknown as JSONRPCMessage;

/** A JSON-RPC id as a map key: 1 and "1" are different ids. */
const idKey = (id: unknown): string => JSON.stringify(id);

/** The SDK transport leaves a stream open until every request on it is answered: end them all. */
const CHILD_GONE = -32603;

export class BridgeSession extends ChildHolder<PendingRequest> {
  readonly transport: StreamableHTTPServerTransport;
  private nextChildId = 1;
  /** The child-side id of each in-flight request, by the client's id. */
  private readonly childIdOf = new Map<string, number>();
  private readonly progressOwner = new Map<string, RequestId>();
  private openGetStreams = 0;
  /** The HTTP responses of this session still open: what backpressure watches. */
  private readonly streams = new Set<ServerResponse>();
  /**
   * The tools/list answers' filter of the latest request: a session has one owner, so this is that
   * caller as the front end saw them last.
   */
  private listAnswer: ListAnswerFilter | undefined;
  /** Called when the transport has issued the session id (before the initialize answer). */
  oninitialized: ((sessionId: string) => void) | undefined;

  constructor(child: StdioChild, owner: SessionOwner, log: Logger, now: () => number, options: ChildHolderOptions) {
    super(child, owner, log, now, options, () => this.streams);
    this.transport = new StreamableHTTPServerTransport({
      // 256 random bits: the session id is a capability (bound to its owner besides).
      sessionIdGenerator: () => randomBytes(32).toString("base64url"),
      onsessioninitialized: (sessionId) => this.oninitialized?.(sessionId),
    });
    this.transport.onmessage = (message) => this.fromClient(message);
    // DELETE from the client closes the transport: the child goes with it.
    this.transport.onclose = () => void this.end("the client ended the session");
    this.transport.onerror = (err) => log.debug({ err: err.message }, "MCP request refused by the transport");
    child.onmessage = (message) => this.fromChild(message);
  }

  get sessionId(): string | undefined {
    return this.transport.sessionId;
  }

  /** Serves one HTTP request of this session; resolves when its response has ended. */
  async handle(req: IncomingMessage, res: ServerResponse, body: unknown, listAnswer?: ListAnswerFilter): Promise<void> {
    this.lastActive = this.now();
    this.listAnswer = listAnswer;
    const get = req.method === "GET";
    if (get) this.openGetStreams++;
    this.streams.add(res);
    res.once("close", () => this.streams.delete(res));
    try {
      await this.transport.handleRequest(req, res, body);
    } finally {
      if (get) this.openGetStreams--;
      this.lastActive = this.now();
    }
  }

  private fromClient(message: JSONRPCMessage): void {
    this.lastActive = this.now();
    const m = message as Json;
    if (typeof m.method === "string" && "id" in m) {
      const clientId = m.id as RequestId;
      const childId = this.nextChildId++;
      const meta = (m.params as Json | undefined)?._meta as Json | undefined;
      const token = meta?.progressToken;
      const progressToken = token === undefined ? undefined : idKey(token);
      this.pending.set(childId, { clientId, method: m.method, progressToken, since: this.now() });
      this.childIdOf.set(idKey(clientId), childId);
      if (progressToken !== undefined) this.progressOwner.set(progressToken, clientId);
      this.toChild(rewritten({ ...m, id: childId }));
      return;
    }
    if (m.method === "notifications/cancelled") {
      const params = m.params as Json | undefined;
      const childId = this.childIdOf.get(idKey(params?.requestId));
      if (childId === undefined) return;
      this.toChild(rewritten({ ...m, params: { ...params, requestId: childId } }));
      return;
    }
    // Other notifications, and answers to the child's own requests (their ids are the child's).
    this.toChild(message);
  }

  private toChild(message: JSONRPCMessage): void {
    if (!this.child.send(message)) this.log.debug("message for a stdio MCP server that has exited; dropped");
  }

  private fromChild(message: JSONRPCMessage): void {
    const m = message as Json;
    if (!("method" in m)) {
      const pending = typeof m.id === "number" ? this.pending.get(m.id) : undefined;
      if (!pending) {
        this.log.debug("stdio MCP server answered a request nobody is waiting for; dropped");
        return;
      }
      this.settle(m.id as number, pending);
      this.lastActive = this.now();
      const answer = { ...m, id: pending.clientId };
      // Where the child's answer becomes the HTTP response (JSON or SSE, the transport's choice).
      this.deliver(rewritten(pending.method === "tools/list" && this.listAnswer ? this.listAnswer(answer) : answer));
      return;
    }
    if (!("id" in m)) {
      const params = m.params as Json | undefined;
      if (m.method === "notifications/progress" && params?.progressToken !== undefined) {
        const owner = this.progressOwner.get(idKey(params.progressToken));
        if (owner !== undefined) {
          this.deliver(message, owner);
          return;
        }
      }
      if (m.method === "notifications/cancelled" && typeof params?.requestId === "number") {
        const pending = this.pending.get(params.requestId);
        if (pending) {
          this.deliver(rewritten({ ...m, params: { ...params, requestId: pending.clientId } }), pending.clientId);
          return;
        }
      }
    }
    this.deliver(message, this.openGetStreams > 0 ? undefined : this.newestPending());
  }

  private newestPending(): RequestId | undefined {
    let newest: PendingRequest | undefined;
    for (const p of this.pending.values()) newest = p;
    return newest?.clientId;
  }

  protected override expire(childId: number): void {
    const pending = this.pending.get(childId);
    if (!pending || this.ended) return;
    this.settle(childId, pending);
    const { reason, error } = this.overdue(pending.method);
    this.toChild({ jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: childId, reason } });
    this.lastActive = this.now();
    this.deliver({ jsonrpc: "2.0", id: pending.clientId, error });
  }

  private settle(childId: number, pending: PendingRequest): void {
    this.pending.delete(childId);
    this.childIdOf.delete(idKey(pending.clientId));
    if (pending.progressToken !== undefined) this.progressOwner.delete(pending.progressToken);
  }

  private deliver(message: JSONRPCMessage, relatedRequestId?: RequestId): void {
    this.transport.send(message, relatedRequestId === undefined ? undefined : { relatedRequestId }).catch((err: Error) => {
      // The request's stream is gone (the client disconnected): nobody to tell.
      this.log.debug({ err: err.message }, "message from the stdio MCP server had no open stream; dropped");
    });
    this.throttle.check();
  }

  /** Requests in flight get a JSON-RPC error (their streams then close); the transport answers 404 from now on. */
  protected override async abandon(reason: string): Promise<void> {
    for (const [childId, pending] of [...this.pending]) {
      this.settle(childId, pending);
      this.deliver({ jsonrpc: "2.0", id: pending.clientId, error: { code: CHILD_GONE, message: `The MCP session ended: ${reason}.` } });
    }
    await this.transport.close().catch(() => undefined);
  }

  /** Closes the GET stream (at shutdown, so that the HTTP server can drain); the client reopens it elsewhere. */
  closeGetStream(): void {
    this.transport.closeStandaloneSSEStream();
  }
}
