// The one timer of a request the HTTP proxy forwards, and the reasons it (or anything else) cuts
// the upstream request with. Progress is read off the request socket's byte count when the timer
// fires (no work per chunk).
import type { IncomingMessage } from "node:http";
import type { SlowClientLimits } from "../http/slow-requests.ts";

/** Abort reasons: why the upstream request was cut. */
export class UpstreamTimeout extends Error {}
export class ClientGone extends Error {}
export class ShuttingDown extends Error {}
/** The client's upload came too slowly (http/slow-requests.ts); the message is the client's answer. */
export class SlowUpload extends Error {}

const noop = () => {};

export interface RequestDeadline {
  /** The body's head has arrived and the rest now streams to the MCP server: the rate rule applies. */
  streaming(): void;
  disarm(): void;
}

/**
 * Always: fires `UpstreamTimeout` once `ms` pass without response headers and without upload
 * progress; bytes that arrived since the last look earn another `ms`. So the deadline falls between
 * `ms` and `2 ms` after the client's last byte, whether its upload is still open or has just completed.
 *
 * With `upload` (the body was still arriving when the proxy started), also `SlowUpload`
 * (uploadDeadline).
 */
export function requestDeadline(ms: number, request: IncomingMessage, upload: SlowClientLimits | undefined, expire: (reason: Error) => void): RequestDeadline {
  if (upload !== undefined) return uploadDeadline(ms, request, upload, expire);
  let seen = request.socket?.bytesRead ?? 0;
  const timer = setTimeout(function check() {
    const now = request.socket?.bytesRead ?? seen;
    if (now !== seen) {
      seen = now;
      timer.refresh();
      return;
    }
    expire(new UpstreamTimeout());
  }, ms);
  return { streaming: noop, disarm: () => clearTimeout(timer) };
}

/**
 * The deadline of a request whose body was still arriving: `UpstreamTimeout` as above, and
 * `SlowUpload` when the part of the body read before the MCP server is contacted (request-body.ts)
 * has not arrived within `bodyDeadlineMs`, however steadily it trickles; and, once the rest
 * streams, when a `rateWindowMs` brings less than `minUploadBytesPerSecond`, unless bytes wait
 * unread in the broker (then the MCP server is the slow side, and the inactivity rule is the one
 * that speaks).
 */
function uploadDeadline(ms: number, request: IncomingMessage, upload: SlowClientLimits, expire: (reason: Error) => void): RequestDeadline {
  let seen = request.socket?.bytesRead ?? 0;
  const started = Date.now();
  let lastProgress = started;
  let phase: "head" | "stream" | "done" = "head";
  let windowStart = started;
  let windowBytes = seen;
  let timer: NodeJS.Timeout;
  const arm = (now: number) => {
    let next = lastProgress + ms - now;
    if (phase === "head") next = Math.min(next, started + upload.bodyDeadlineMs - now);
    else if (phase === "stream") next = Math.min(next, windowStart + upload.rateWindowMs - now);
    timer = setTimeout(check, Math.max(1, next));
  };
  const check = () => {
    const now = Date.now();
    const bytes = request.socket?.bytesRead ?? seen;
    if (bytes !== seen) {
      seen = bytes;
      lastProgress = now;
    }
    if (request.complete) phase = "done";
    if (phase === "head" && now - started >= upload.bodyDeadlineMs) {
      return expire(new SlowUpload(`The upload did not arrive within ${upload.bodyDeadlineMs / 1000} s.`));
    }
    if (phase === "stream" && now - windowStart >= upload.rateWindowMs) {
      const rate = ((bytes - windowBytes) * 1000) / (now - windowStart);
      if (rate < upload.minUploadBytesPerSecond && request.readableLength === 0) {
        return expire(new SlowUpload(`The upload is too slow (under ${upload.minUploadBytesPerSecond} bytes per second).`));
      }
      windowStart = now;
      windowBytes = bytes;
    }
    if (now - lastProgress >= ms) return expire(new UpstreamTimeout());
    arm(now);
  };
  arm(started);
  return {
    streaming() {
      if (phase !== "head") return;
      phase = "stream";
      windowStart = Date.now();
      windowBytes = request.socket?.bytesRead ?? seen;
      clearTimeout(timer);
      arm(windowStart);
    },
    disarm: () => clearTimeout(timer),
  };
}
