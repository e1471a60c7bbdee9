// The identity provider's HTTP client over undici's dispatcher API, with one keep-alive connection
// pool per origin (undici's Agent keeps a Pool per origin). Two shapes of one request: `answer`, a
// status, headers and the whole body (what the GitHub provider reads), and a fetch-shaped function
// returning a WHATWG Response (openid-client's customFetch needs one). A Response costs ~70 µs of
// CPU to build and read (a ReadableStream per body), the global fetch ~2× more again, and the
// re-check makes one request per /mcp request. The address policy applies to every connection
// (guarded-lookup.ts). Every request has a deadline: the caller's signal, or else `timeoutMs` for
// the whole request, connection to last byte of the body. Redirects are never followed (callers
// ask for "manual" and read the 3xx themselves); bodies are read whole, up to a cap. Failures look
// as fetch's do (TypeError "fetch failed" with the cause), so callers classify them as before.
import type { LookupFunction } from "node:net";
import { EventEmitter } from "node:events";
import type { IncomingHttpHeaders } from "node:http";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { Agent, type Dispatcher } from "undici";
import { OutboundFetchError } from "./fetch-error.ts";
import { guardedLookup, refuseAddressLiteral, systemLookup } from "./guarded-lookup.ts";
import { inSpan, SpanKind, withTraceContext } from "../telemetry/span.ts";
import { redactUrl } from "../logger.ts";

export interface PooledFetchOptions {
  /** Private and loopback addresses too (cloud metadata never): true for an operator's own IdP. */
  readonly allowPrivateNetworks: boolean;
  /** The whole request's deadline when the caller gives no signal; also undici's connect, headers and body timeouts. */
  readonly timeoutMs: number;
  /** Largest body accepted (default 1 MiB: discovery documents, JWKS, token answers are far smaller). */
  readonly maxBytes?: number;
  /** Name resolution (default the system's). Tests answer with their own addresses. */
  readonly lookup?: LookupFunction;
  /** Connections kept per origin (default 8). */
  readonly connectionsPerOrigin?: number;
}

/** The request options openid-client and the providers pass (a subset of fetch's). */
export interface PooledFetchInit {
  readonly method?: string;
  readonly headers?: Record<string, string> | Headers;
  readonly body?: string | URLSearchParams | Uint8Array | ArrayBuffer | ReadableStream | null;
  readonly signal?: AbortSignal | null;
  /** Redirects are never followed: a 3xx is the answer. */
  readonly redirect?: "manual";
}

/** An answer read whole: what a caller that needs no WHATWG Response reads. */
export class PooledAnswer {
  constructor(
    readonly status: number,
    /** As undici parsed them: lower-cased names, repeated headers as arrays. */
    readonly headers: IncomingHttpHeaders,
    readonly body: Buffer,
  ) {}

  get ok(): boolean {
    return this.status >= 200 && this.status < 300;
  }

  /** The header's value (name in any case; repeated ones joined as fetch joins them), or null. */
  header(name: string): string | null {
    const value = this.headers[name.toLowerCase()];
    if (value === undefined) return null;
    return Array.isArray(value) ? value.join(", ") : value;
  }

  text(): string {
    return this.body.toString("utf8");
  }

  /** The body parsed as JSON; rejects as Response.json() does when it is not JSON. */
  async json(): Promise<unknown> {
    return JSON.parse(this.text());
  }
}

export interface PooledFetch {
  (url: string | URL, init?: PooledFetchInit): Promise<Response>;
  /** The same request, answered without building a Response. */
  answer(url: string | URL, init?: PooledFetchInit): Promise<PooledAnswer>;
  close(): Promise<void>;
}

export const DEFAULT_MAX_BYTES = 1024 * 1024;
/** Statuses whose Response may not carry a body (the Response constructor refuses one). */
const NULL_BODY = new Set([204, 205, 304]);

function headerRecord(headers: PooledFetchInit["headers"]): Record<string, string> {
  if (!headers) return {};
  // A copy: a default content type may be added, and the caller's object is not ours to change.
  if (headers instanceof Headers) return Object.fromEntries(headers.entries());
  return { ...headers };
}

function responseHeaders(raw: IncomingHttpHeaders): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  for (const [name, value] of Object.entries(raw)) {
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) pairs.push([name, v]);
    else pairs.push([name, value]);
  }
  return pairs;
}

async function readBody(body: Dispatcher.ResponseData["body"], maxBytes: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += (chunk as Buffer).length;
    if (size > maxBytes) {
      body.on("error", () => undefined);
      body.destroy();
      throw new OutboundFetchError("too-large", `the answer is larger than ${maxBytes} bytes`);
    }
    chunks.push(chunk as Buffer);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
}

/** The body as undici sends it; a form gets fetch's default content type when it has none. */
function requestBody(body: PooledFetchInit["body"], headers: Record<string, string>): string | Uint8Array | Readable | null {
  if (body === undefined || body === null) return null;
  if (body instanceof URLSearchParams) {
    if (!Object.keys(headers).some((name) => name.toLowerCase() === "content-type"))
      headers["content-type"] = "application/x-www-form-urlencoded;charset=UTF-8";
    return body.toString();
  }
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  if (typeof body === "string" || body instanceof Uint8Array) return body;
  return Readable.fromWeb(body as WebReadableStream);
}

function clientSpanAttributes(url: string | URL, method: string): Record<string, string | number> {
  const target = typeof url === "string" ? new URL(url) : url;
  return {
    "http.request.method": method,
    "server.address": target.hostname,
    "server.port": Number(target.port) || (target.protocol === "https:" ? 443 : 80),
    "url.full": redactUrl(target.href),
  };
}

/**
 * The deadline of a request without the caller's signal: an EventEmitter undici listens to (its
 * documented alternative to an AbortSignal; an AbortSignal.timeout costs ~10 µs to make and
 * more when its timer fires long after the answer), and a timer cleared with the answer.
 */
function deadline(timeoutMs: number): { signal: EventEmitter & { reason?: unknown }; timer: NodeJS.Timeout } {
  const signal: EventEmitter & { reason?: unknown } = new EventEmitter();
  const timer = setTimeout(() => {
    // The reason AbortSignal.timeout gives: callers classify it as a timeout.
    signal.reason = new DOMException(`no answer within ${timeoutMs} ms`, "TimeoutError");
    signal.emit("abort");
  }, timeoutMs);
  timer.unref();
  return { signal, timer };
}

/** One request through the pool, its body read within the cap; failures reported as fetch reports them. */
async function send(agent: Agent, options: PooledFetchOptions, url: string | URL, init: PooledFetchInit): Promise<PooledAnswer> {
  const target = typeof url === "string" ? new URL(url) : url;
  const headers = withTraceContext(headerRecord(init.headers));
  const body = requestBody(init.body, headers);
  const own = init.signal ? undefined : deadline(options.timeoutMs);
  try {
    let answered: Dispatcher.ResponseData;
    try {
      refuseAddressLiteral(target, options.allowPrivateNetworks);
      answered = await agent.request({
        origin: target.origin,
        path: target.pathname + target.search,
        method: (init.method ?? "GET") as Dispatcher.HttpMethod,
        headers,
        body,
        signal: init.signal ?? own?.signal ?? null,
      });
    } catch (err) {
      // As fetch reports it: an abort as itself, anything else as "fetch failed" with the cause.
      // By name: the caller's signal may come from another realm, whose DOMException is no Error here.
      const name = (err as { name?: unknown } | null)?.name;
      if (name === "AbortError" || name === "TimeoutError") throw err;
      throw new TypeError("fetch failed", { cause: err });
    }
    return new PooledAnswer(answered.statusCode, answered.headers, await readBody(answered.body, options.maxBytes ?? DEFAULT_MAX_BYTES));
  } finally {
    if (own) clearTimeout(own.timer);
  }
}

export function createPooledFetch(options: PooledFetchOptions): PooledFetch {
  const agent = new Agent({
    connect: { lookup: guardedLookup(options.lookup ?? systemLookup, options.allowPrivateNetworks), timeout: options.timeoutMs },
    connections: options.connectionsPerOrigin ?? 8,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    keepAliveTimeout: 10_000,
  });

  /** One client span per request (the IdP is told its trace context); with tracing off, the request alone. */
  const answer = (url: string | URL, init: PooledFetchInit = {}): Promise<PooledAnswer> =>
    inSpan(
      init.method ?? "GET",
      () => clientSpanAttributes(url, init.method ?? "GET"),
      async (span) => {
        const answered = await send(agent, options, url, init);
        span?.setAttribute("http.response.status_code", answered.status);
        return answered;
      },
      { kind: SpanKind.CLIENT, childOnly: true },
    );

  const pooledFetch = async (url: string | URL, init: PooledFetchInit = {}): Promise<Response> => {
    const answered = await answer(url, init);
    const { status } = answered;
    return new Response(NULL_BODY.has(status) ? null : answered.body, { status, headers: responseHeaders(answered.headers) });
  };
  return Object.assign(pooledFetch, { answer, close: () => agent.close() });
}
