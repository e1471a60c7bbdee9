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
 * (UploadDeadline).
 *
 * Classes whose timer gets the deadline as its argument, rather than closures: one object and one
 * timer per request, the fewest bytes a request's deadline can cost (bench row (m)).
 */
export function requestDeadline(ms: number, request: IncomingMessage, upload: SlowClientLimits | undefined, expire: (reason: Error) => void): RequestDeadline {
  return upload === undefined ? new InactivityDeadline(ms, request, expire) : new UploadDeadline(ms, request, upload, expire);
}

class InactivityDeadline implements RequestDeadline {
  private seen: number;
  private readonly timer: NodeJS.Timeout;

  constructor(
    ms: number,
    private readonly request: IncomingMessage,
    private readonly expire: (reason: Error) => void,
  ) {
    this.seen = request.socket?.bytesRead ?? 0;
    this.timer = setTimeout(checkInactivity, ms, this);
  }

  check(): void {
    const now = this.request.socket?.bytesRead ?? this.seen;
    if (now !== this.seen) {
      this.seen = now;
      this.timer.refresh();
      return;
    }
    this.expire(new UpstreamTimeout());
  }

  streaming(): void {}

  disarm(): void {
    clearTimeout(this.timer);
  }
}

function checkInactivity(deadline: InactivityDeadline): void {
  deadline.check();
}

/**
 * The deadline of a request whose body was still arriving: `UpstreamTimeout` as above, and
 * `SlowUpload` when the part of the body read before the MCP server is contacted (request-body.ts)
 * has not arrived within `bodyDeadlineMs`, however steadily it trickles; and, once the rest
 * streams, when a `rateWindowMs` brings less than `minUploadBytesPerSecond`, unless bytes wait
 * unread in the broker (then the MCP server is the slow side, and the inactivity rule is the one
 * that speaks).
 */
class UploadDeadline implements RequestDeadline {
  private seen: number;
  private readonly started = Date.now();
  private lastProgress = this.started;
  private phase: "head" | "stream" | "done" = "head";
  private windowStart = this.started;
  private windowBytes: number;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ms: number,
    private readonly request: IncomingMessage,
    private readonly upload: SlowClientLimits,
    private readonly expire: (reason: Error) => void,
  ) {
    this.seen = request.socket?.bytesRead ?? 0;
    this.windowBytes = this.seen;
    this.arm(this.started);
  }

  private arm(now: number): void {
    let next = this.lastProgress + this.ms - now;
    if (this.phase === "head") next = Math.min(next, this.started + this.upload.bodyDeadlineMs - now);
    else if (this.phase === "stream") next = Math.min(next, this.windowStart + this.upload.rateWindowMs - now);
    this.timer = setTimeout(checkUpload, Math.max(1, next), this);
  }

  check(): void {
    const { request, upload } = this;
    const now = Date.now();
    const bytes = request.socket?.bytesRead ?? this.seen;
    if (bytes !== this.seen) {
      this.seen = bytes;
      this.lastProgress = now;
    }
    if (request.complete) this.phase = "done";
    if (this.phase === "head" && now - this.started >= upload.bodyDeadlineMs) {
      this.expire(new SlowUpload(`The upload did not arrive within ${upload.bodyDeadlineMs / 1000} s.`));
      return;
    }
    if (this.phase === "stream" && now - this.windowStart >= upload.rateWindowMs) {
      const rate = ((bytes - this.windowBytes) * 1000) / (now - this.windowStart);
      if (rate < upload.minUploadBytesPerSecond && request.readableLength === 0) {
        this.expire(new SlowUpload(`The upload is too slow (under ${upload.minUploadBytesPerSecond} bytes per second).`));
        return;
      }
      this.windowStart = now;
      this.windowBytes = bytes;
    }
    if (now - this.lastProgress >= this.ms) this.expire(new UpstreamTimeout());
    else this.arm(now);
  }

  streaming(): void {
    if (this.phase !== "head") return;
    this.phase = "stream";
    this.windowStart = Date.now();
    this.windowBytes = this.request.socket?.bytesRead ?? this.seen;
    clearTimeout(this.timer);
    this.arm(this.windowStart);
  }

  disarm(): void {
    clearTimeout(this.timer);
  }
}

function checkUpload(deadline: UploadDeadline): void {
  deadline.check();
}
