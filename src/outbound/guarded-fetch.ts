// The outbound GET for documents whose URL an outsider chose (Client ID Metadata Documents): https
// only, no redirects followed, a deadline, a size cap, JSON only, and no connection to an address
// the policy refuses (guarded-lookup.ts).
import type { LookupFunction } from "node:net";
import { Agent, request } from "undici";
import { OutboundFetchError } from "./fetch-error.ts";
import { guardedLookup, refuseAddressLiteral, systemLookup } from "./guarded-lookup.ts";
import { firstLine } from "../lib/error-text.ts";

export interface GuardedFetchOptions {
  /** CIMD_ALLOW_PRIVATE_NETWORKS: private and loopback addresses too (cloud metadata never). */
  readonly allowPrivateNetworks: boolean;
  /** The whole request, connection to last byte (default 5 s). */
  readonly timeoutMs?: number;
  /** Largest body accepted (default 32 KiB). */
  readonly maxBytes?: number;
  /** Name resolution (default the system's, dns.lookup). Tests answer with their own addresses. */
  readonly lookup?: LookupFunction;
  /**
   * Certificate authorities to trust instead of the system's (tests: a throwaway CA). Production
   * leaves it unset: Node's roots plus NODE_EXTRA_CA_CERTS.
   */
  readonly ca?: string | readonly string[];
}

export { OutboundFetchError };

export interface FetchedJson {
  readonly status: number;
  /** Lower-cased header names; the caching headers the caller reads. */
  readonly headers: Readonly<Record<string, string | undefined>>;
  /** The parsed body (status 200 only). */
  readonly body: unknown;
}

export interface JsonFetcher {
  /**
   * GETs an https URL as JSON. A 200 with a JSON body resolves with it; 404 and 410 resolve
   * with no body (the caller decides what "gone" means); anything else rejects with an
   * OutboundFetchError.
   */
  getJson(url: string): Promise<FetchedJson>;
  close(): Promise<void>;
}

export const DEFAULT_TIMEOUT_MS = 5_000;
/**
 * The draft suggests 5 KB (draft-ietf-oauth-client-id-metadata-document §"Maximum Response
 * Size"), but claude.ai's own document outgrew 5120 bytes (cloudflare/mcp#45). 32 KiB still bounds
 * memory (the cache keeps at most a thousand documents) and holds twenty long redirect URIs.
 */
export const DEFAULT_MAX_BYTES = 32 * 1024;

const JSON_TYPE = /^application\/([a-z0-9.+-]+\+)?json\s*(;|$)/i;

/** Drops a body nobody will read (undici's body emits "error" when destroyed: swallowed here). */
function discard(body: { on(event: "error", listener: () => void): unknown; destroy(): unknown }): void {
  body.on("error", () => undefined);
  body.destroy();
}

function causeChain(err: unknown): unknown[] {
  const chain: unknown[] = [];
  for (let e: unknown = err; e && chain.length < 6; e = (e as { cause?: unknown }).cause) chain.push(e);
  return chain;
}

type Response = Awaited<ReturnType<typeof request>>;

/** The GET sent through the guarded agent; a refusal, a timeout or a failed connection said as such. */
async function send(target: URL, agent: Agent, timeoutMs: number, signal: AbortSignal): Promise<Response> {
  try {
    return await request(target, {
      method: "GET",
      dispatcher: agent,
      signal,
      headers: { accept: "application/json", "user-agent": "mcp-auth-broker (client metadata)" },
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    });
  } catch (err) {
    const refused = causeChain(err).find((e) => e instanceof OutboundFetchError);
    if (refused) throw refused;
    if (signal.aborted || causeChain(err).some((e) => (e as { code?: string }).code === "UND_ERR_CONNECT_TIMEOUT"))
      throw new OutboundFetchError("timeout", `no answer within ${timeoutMs / 1000} s`);
    throw new OutboundFetchError("network", `could not connect: ${firstLine(err)}`);
  }
}

/** Refuses an answer that is not a 200 with a JSON body within the cap; 404 and 410 resolve with no body. */
async function refuseUnreadable(res: Response, headers: Record<string, string | undefined>, maxBytes: number): Promise<FetchedJson | undefined> {
  const status = res.statusCode;
  if (status !== 200) {
    await res.body.dump().catch(() => undefined);
    if (status === 404 || status === 410) return { status, headers, body: undefined };
    if (status >= 300 && status < 400)
      throw new OutboundFetchError("redirect", `it answered with a redirect (${status}), and redirects are not followed`, status);
    throw new OutboundFetchError("status", `it answered with HTTP status ${status}`, status);
  }
  if (!JSON_TYPE.test(headers["content-type"] ?? "")) {
    discard(res.body);
    throw new OutboundFetchError("not-json", `it is not JSON (content-type ${JSON.stringify(headers["content-type"] ?? "")})`);
  }
  const declared = Number(headers["content-length"]);
  if (declared > maxBytes) {
    discard(res.body);
    throw new OutboundFetchError("too-large", `it is larger than ${maxBytes} bytes`);
  }
  return undefined;
}

/** The body, cut off as soon as it passes the cap (a missing or false content-length does not help). */
async function readCapped(res: Response, maxBytes: number, timeoutMs: number, signal: AbortSignal): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of res.body) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) {
        discard(res.body);
        throw new OutboundFetchError("too-large", `it is larger than ${maxBytes} bytes`);
      }
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof OutboundFetchError) throw err;
    if (signal.aborted) throw new OutboundFetchError("timeout", `no answer within ${timeoutMs / 1000} s`);
    throw new OutboundFetchError("network", `the answer broke off: ${firstLine(err)}`);
  }
  return Buffer.concat(chunks);
}

export function createGuardedFetcher(options: GuardedFetchOptions): JsonFetcher {
  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const lookup = guardedLookup(options.lookup ?? systemLookup, options.allowPrivateNetworks);
  const agent = new Agent({
    connect: { lookup, timeout: timeoutMs, ...(options.ca ? { ca: [...[options.ca].flat()] } : {}) },
    keepAliveTimeout: 10_000,
    connections: 4,
  });

  async function getJson(url: string): Promise<FetchedJson> {
    const target = new URL(url);
    if (target.protocol !== "https:") throw new OutboundFetchError("not-https", "only https URLs are fetched");
    refuseAddressLiteral(target, options.allowPrivateNetworks);
    const signal = AbortSignal.timeout(timeoutMs);
    const res = await send(target, agent, timeoutMs, signal);
    const headers: Record<string, string | undefined> = {};
    for (const [name, value] of Object.entries(res.headers)) headers[name.toLowerCase()] = Array.isArray(value) ? value.join(", ") : value;
    const gone = await refuseUnreadable(res, headers, maxBytes);
    if (gone) return gone;
    const bytes = await readCapped(res, maxBytes, timeoutMs, signal);
    let body: unknown;
    try {
      body = JSON.parse(bytes.toString("utf8"));
    } catch {
      throw new OutboundFetchError("not-json", "its body is not valid JSON");
    }
    return { status: res.statusCode, headers, body };
  }

  return { getJson, close: () => agent.close() };
}
