// A request body that has already arrived whole: a small message usually comes in the same packet
// as its headers, and by the time a handler asks, all its Content-Length bytes wait in the
// request's buffer. Read then in one call, with no listener added and removed, no promise, and no
// wait for "end" (which Node emits a turn later). The /mcp proxy's body (gateway/request-body.ts)
// and the form and JSON readers (body.ts, through arrivedWholeSoon) both start here.
import type { IncomingMessage } from "node:http";

/**
 * All of the body's Content-Length bytes when they are in the request's buffer; undefined otherwise
 * (still arriving, chunked, already being read, the connection gone, over `limit`): the caller then
 * reads it as a stream.
 */
export function arrivedWhole(request: IncomingMessage, limit: number): Buffer | undefined {
  const declared = request.headers["content-length"];
  if (declared === undefined || request.readableFlowing !== null || request.destroyed) return undefined;
  const length = Number(declared);
  if (length > limit || request.readableLength !== length) return undefined;
  const data = length === 0 ? Buffer.alloc(0) : (request.read() as Buffer);
  // Nothing can follow the declared length; the parser may not have marked the end yet. Flowing,
  // the request ends ("end") as a body read by events does.
  request.resume();
  return data;
}

/**
 * arrivedWhole, now or once the parser has finished the packet in hand. A handler reached without
 * waiting on anything runs inside the parser's "request" event, before the parser has pushed the
 * body that came in the same packet as the headers; one microtask later it has. (In the refresh
 * rounds of `npm run bench`, the token endpoint met every body at 0 bytes buffered, and all of it
 * one microtask later.)
 */
export async function arrivedWholeSoon(request: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  const now = arrivedWhole(request, limit);
  if (now !== undefined || request.readableLength > 0 || request.complete) return now;
  await Promise.resolve();
  return arrivedWhole(request, limit);
}
