// The identity provider's HTTP client: a fetch-shaped function (what openid-client's customFetch
// and the GitHub provider call) over undici's dispatcher API, with one keep-alive connection pool
// per origin (undici's Agent keeps a Pool per origin). The global fetch costs ~2× the CPU per call
// (WHATWG request and stream machinery) and shares its connections with everything else in the
// process. The address policy applies to every connection (guarded-lookup.ts). Redirects are never
// followed (callers ask for "manual" and read the 3xx themselves); bodies are read whole, up to a
// cap. Failures look as fetch's do (TypeError "fetch failed" with the cause), so callers classify
// them as before.
import type { LookupFunction } from "node:net";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { Agent, type Dispatcher } from "undici";
import { OutboundFetchError } from "./fetch-error.ts";
import { guardedLookup, refuseAddressLiteral, systemLookup } from "./guarded-lookup.ts";

export interface PooledFetchOptions {
  /** Private and loopback addresses too (cloud metadata never): true for an operator's own IdP. */
  readonly allowPrivateNetworks: boolean;
  /** Connect, headers and body timeouts (the caller's signal may end a request sooner). */
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

export interface PooledFetch {
  (url: string | URL, init?: PooledFetchInit): Promise<Response>;
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

function responseHeaders(raw: Dispatcher.ResponseData["headers"]): Array<[string, string]> {
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

export function createPooledFetch(options: PooledFetchOptions): PooledFetch {
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const agent = new Agent({
    connect: { lookup: guardedLookup(options.lookup ?? systemLookup, options.allowPrivateNetworks), timeout: options.timeoutMs },
    connections: options.connectionsPerOrigin ?? 8,
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    keepAliveTimeout: 10_000,
  });

  const pooledFetch = async (url: string | URL, init: PooledFetchInit = {}): Promise<Response> => {
    const target = typeof url === "string" ? new URL(url) : url;
    const headers = headerRecord(init.headers);
    const body = requestBody(init.body, headers);
    let answer: Dispatcher.ResponseData;
    try {
      refuseAddressLiteral(target, options.allowPrivateNetworks);
      answer = await agent.request({
        origin: target.origin,
        path: target.pathname + target.search,
        method: (init.method ?? "GET") as Dispatcher.HttpMethod,
        headers,
        body,
        signal: init.signal ?? null,
      });
    } catch (err) {
      // As fetch reports it: an abort as itself, anything else as "fetch failed" with the cause.
      if (err instanceof Error && (err.name === "AbortError" || err.name === "TimeoutError")) throw err;
      throw new TypeError("fetch failed", { cause: err });
    }
    const status = answer.statusCode;
    const bytes = await readBody(answer.body, maxBytes);
    return new Response(NULL_BODY.has(status) ? null : bytes, { status, headers: responseHeaders(answer.headers) });
  };
  return Object.assign(pooledFetch, { close: () => agent.close() });
}
