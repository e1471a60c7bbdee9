// The body of a request forwarded to the MCP server. JSON-RPC messages are small: a body that ends
// within SMALL_BODY_BYTES is read whole (bounded memory) and leaves in the same write as the request
// headers, which saved ~15% of the broker's CPU per request over a stream. A larger one is read up
// to SMALL_BODY_BYTES and only then streamed with backpressure. So no connection to the MCP server is taken for
// a body that has not arrived: a client trickling its upload holds only its own connection, until
// the deadlines of proxy.ts (http/slow-requests.ts limits) cut it.
import type { IncomingMessage } from "node:http";
import { arrivedWhole } from "../http/arrived-body.ts";
import { whenCut, type CutSignal } from "./exchange-abort.ts";

export const SMALL_BODY_BYTES = 64 * 1024;

/** A Buffer, or an async iterable undici streams; null without a body. */
export type UpstreamBody = Buffer | AsyncIterable<Buffer> | null;

/**
 * The largest body read whole so that the broker can check it before forwarding (a body whose
 * headers mirror its fields, header-consistency.ts): the SDKs' own servers refuse larger ones.
 */
export const CHECKED_BODY_BYTES = 4 * 1024 * 1024;

/** A body that must be read whole (`whole`) and is larger than CHECKED_BODY_BYTES. */
export class BodyTooLarge extends Error {
  constructor() {
    super(
      `The request body is larger than ${CHECKED_BODY_BYTES / (1024 * 1024)} MiB, the most the broker reads to check a request's Mcp-Method and Mcp-Name headers against it.`,
    );
  }
}

/** `whole`: the body is read whole (it is to be checked), never streamed; BodyTooLarge beyond CHECKED_BODY_BYTES. */
export async function upstreamBody(request: IncomingMessage, signal: CutSignal, whole = false): Promise<UpstreamBody> {
  if (request.method !== "POST") return null;
  const limit = whole ? CHECKED_BODY_BYTES : SMALL_BODY_BYTES;
  // The front end has awaited the bearer check by now: a body sent with the headers is in the buffer.
  const arrived = signal.aborted ? undefined : arrivedWhole(request, limit);
  if (arrived) return arrived;
  const head = await readHead(request, signal, limit);
  if (head.ended) return head.data;
  if (whole) throw new BodyTooLarge();
  // An iterator that undici may abandon on failure without destroying the client's request (and
  // with it the socket), so that the client can still be answered 502/504.
  return prefixed(head.data, request.iterator({ destroyOnReturn: false }) as AsyncIterableIterator<Buffer>);
}

/** Whether `body` is streamed (the upload goes on while the MCP server is already connected). */
export function isStreamed(body: UpstreamBody): body is AsyncIterable<Buffer> {
  return body !== null && !Buffer.isBuffer(body);
}

async function* prefixed(head: Buffer, rest: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  yield head;
  yield* rest;
}

/**
 * Reads until the body ends (`ended`: data is all of it) or more than `limit` bytes have come
 * (data is its head; the request is left paused with the rest unread).
 */
function readHead(request: IncomingMessage, signal: CutSignal, limit: number): Promise<{ data: Buffer; ended: boolean }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let unlisten: (() => void) | undefined;
    const settle = (err: unknown | null, ended = false) => {
      request.off("data", onData).off("end", onEnd).off("error", settle).off("close", onClose);
      unlisten?.();
      if (err === null) resolve({ data: Buffer.concat(chunks), ended });
      else reject(err instanceof Error ? err : new Error(String(err)));
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.length;
      if (size > limit) {
        request.pause();
        settle(null);
      }
    };
    const onEnd = () => settle(null, true);
    const onClose = () => settle(new Error("the client closed the connection during its upload"));
    const onAbort = () => settle(signal.reason);
    if (signal.aborted) return onAbort();
    if (request.destroyed) return onClose();
    request.on("data", onData).once("end", onEnd).once("error", settle).once("close", onClose);
    unlisten = whenCut(signal, onAbort);
  });
}
