// The body of a request forwarded to the MCP server. JSON-RPC messages are small: a body with a
// Content-Length up to SMALL_BODY_BYTES is read whole (bounded memory) and leaves in the same write
// as the request headers, which saved ~15% of the broker's CPU per request over a stream. Anything
// larger, or of unknown length, is streamed as it arrives, with backpressure.
import type { IncomingMessage } from "node:http";

export const SMALL_BODY_BYTES = 64 * 1024;

/** A Buffer, or an async iterable undici streams; null without a body. */
export type UpstreamBody = Buffer | AsyncIterable<Buffer> | null;

export async function upstreamBody(request: IncomingMessage, signal: AbortSignal): Promise<UpstreamBody> {
  if (request.method !== "POST") return null;
  const header = request.headers["content-length"];
  const length = header === undefined ? NaN : Number(header);
  if (Number.isSafeInteger(length) && length <= SMALL_BODY_BYTES) return readWhole(request, signal);
  // An iterator that undici may abandon on failure without destroying the client's request (and
  // with it the socket), so that the client can still be answered 502/504.
  return request.iterator({ destroyOnReturn: false }) as AsyncIterableIterator<Buffer>;
}

/** Reads the whole body; rejects when the client goes away or `signal` aborts first. */
function readWhole(request: IncomingMessage, signal: AbortSignal): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const settle = (err: unknown | null) => {
      request.off("data", onData).off("end", onEnd).off("error", settle).off("close", onClose);
      signal.removeEventListener("abort", onAbort);
      if (err === null) resolve(Buffer.concat(chunks));
      else reject(err instanceof Error ? err : new Error(String(err)));
    };
    const onData = (chunk: Buffer) => void chunks.push(chunk);
    const onEnd = () => settle(null);
    const onClose = () => settle(new Error("the client closed the connection during its upload"));
    const onAbort = () => settle(signal.reason);
    if (signal.aborted) return onAbort();
    request.on("data", onData).once("end", onEnd).once("error", settle).once("close", onClose);
    signal.addEventListener("abort", onAbort, { once: true });
  });
}
