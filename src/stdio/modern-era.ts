// MCP 2026-07-28 (the "modern" era) as the stdio bridge speaks it towards clients, in front of a
// child that speaks an earlier revision: no initialize, no session; every request names its
// protocol version in `_meta` (and the MCP-Protocol-Version header); every result carries
// `resultType`, cacheable results `ttlMs` and `cacheScope`, and results name the server in `_meta`.
// The bridge initializes the child itself (stateless-child.ts) and translates here. Pure functions,
// no I/O.
//
// Sources: the specification (basic/versioning.mdx, basic/transports/streamable-http.mdx,
// server/discover.mdx, changelog.mdx of 2026-07-28) and what the MCP SDK v2 client (2.4) checks:
// a 2026-era result without `resultType`, or a list result without `ttlMs`/`cacheScope`, is refused
// as invalid (core-internal wire/rev2026-07-28/codec.ts).

export type Json = Record<string, unknown>;

/** The modern revisions the bridge serves. */
export const MODERN_VERSIONS: readonly string[] = ["2026-07-28"];
/** The newest revision with an initialize handshake: what the bridge offers a child. */
export const NEWEST_LEGACY_VERSION = "2025-11-25";

/** The reserved `_meta` keys of the per-request envelope, and the result's server identity. */
export const META = {
  protocolVersion: "io.modelcontextprotocol/protocolVersion",
  clientInfo: "io.modelcontextprotocol/clientInfo",
  clientCapabilities: "io.modelcontextprotocol/clientCapabilities",
  logLevel: "io.modelcontextprotocol/logLevel",
  serverInfo: "io.modelcontextprotocol/serverInfo",
} as const;

/** Error codes the 2026-07-28 revision names (HeaderMismatch is the gateway's: header-consistency.ts). */
export const UNSUPPORTED_PROTOCOL_VERSION = -32022;
export const METHOD_NOT_FOUND = -32601;

/**
 * Methods the bridge does not serve to modern clients: removed by 2026-07-28 (ping,
 * logging/setLevel, the subscribe pair), or long-lived change streams, which need a child that
 * pushes list changes to one listener (subscriptions/listen).
 */
const NOT_SERVED = new Set(["ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe", "subscriptions/listen"]);

/** Results that 2026-07-28 requires to carry `ttlMs` and `cacheScope` (CacheableResult). */
const CACHEABLE = new Set(["tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover"]);

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);

/** Whether a revision belongs to the modern era (2026-07-28 and later; revisions are dates). */
export function isModernVersion(version: string | undefined): boolean {
  return version !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(version) && version >= "2026-07-28";
}

/** The protocol version a single JSON-RPC message claims in its `_meta` envelope, if any. */
export function envelopeVersion(message: unknown): string | undefined {
  if (!isObject(message) || !isObject(message.params) || !isObject(message.params._meta)) return undefined;
  const version = message.params._meta[META.protocolVersion];
  return typeof version === "string" ? version : undefined;
}

export interface ModernRefusal {
  readonly status: number;
  readonly code: number;
  readonly message: string;
  readonly data?: Json;
}

/**
 * What must be refused before a modern message goes anywhere (its headers agree with it, the
 * gateway checked): a version the bridge does not serve, a method it does not serve. Undefined:
 * serve it.
 */
export function refusal(message: Json): ModernRefusal | undefined {
  const claimed = envelopeVersion(message);
  if (claimed === undefined || !MODERN_VERSIONS.includes(claimed)) {
    return {
      status: 400,
      code: UNSUPPORTED_PROTOCOL_VERSION,
      message: "Unsupported protocol version",
      data: { supported: [...MODERN_VERSIONS], requested: claimed },
    };
  }
  if (typeof message.method === "string" && "id" in message && NOT_SERVED.has(message.method)) {
    return { status: 404, code: METHOD_NOT_FOUND, message: `Method not found: ${message.method} is not served to MCP ${claimed} clients here.` };
  }
  return undefined;
}

/** The request's params as an earlier-revision child expects them: without the modern envelope. */
export function legacyParams(params: unknown): unknown {
  if (!isObject(params) || !isObject(params._meta)) return params;
  const meta: Json = { ...params._meta };
  for (const key of [META.protocolVersion, META.clientInfo, META.clientCapabilities, META.logLevel]) delete meta[key];
  const { _meta: _, ...rest } = params;
  return Object.keys(meta).length > 0 ? { ...rest, _meta: meta } : rest;
}

/**
 * A child's result as 2026-07-28 requires it: `resultType`, cache fields (private and not to be
 * reused: the answer comes from one user's process), the server's identity in `_meta`.
 */
export function modernResult(method: string, result: unknown, serverInfo: unknown): Json {
  const out: Json = isObject(result) ? { ...result } : {};
  out.resultType ??= "complete";
  if (CACHEABLE.has(method) && out.resultType === "complete") {
    if (!(typeof out.ttlMs === "number" && Number.isSafeInteger(out.ttlMs) && out.ttlMs >= 0)) out.ttlMs = 0;
    if (out.cacheScope !== "public" && out.cacheScope !== "private") out.cacheScope = "private";
  }
  // The child's own `_meta` entries win; a `_meta` that is not an object is left for the client to refuse.
  if (serverInfo !== undefined && (out._meta === undefined || isObject(out._meta))) {
    out._meta = { [META.serverInfo]: serverInfo, ...(out._meta as Json | undefined) };
  }
  return out;
}

/** A child's error as 2026-07-28 numbers it (resource not found is Invalid Params now). */
export function modernError(error: unknown): Json {
  const out: Json = isObject(error) ? { ...error } : { code: -32603, message: "Internal error" };
  if (out.code === -32002) out.code = -32602;
  return out;
}

/** What the child said of itself when the bridge initialized it. */
export interface ChildDescription {
  readonly protocolVersion: string;
  readonly serverInfo: unknown;
  readonly capabilities: Json;
  readonly instructions: string | undefined;
}

/** Reads the child's initialize result; undefined when it is not one. */
export function describeChild(result: unknown): ChildDescription | undefined {
  if (!isObject(result) || typeof result.protocolVersion !== "string") return undefined;
  return {
    protocolVersion: result.protocolVersion,
    serverInfo: result.serverInfo,
    capabilities: isObject(result.capabilities) ? result.capabilities : {},
    instructions: typeof result.instructions === "string" ? result.instructions : undefined,
  };
}

/**
 * The answer to `server/discover`, from the child's initialize result. Change notifications
 * (listChanged, subscribe) are not advertised: the bridge serves no subscriptions/listen stream.
 */
export function discoverResult(child: ChildDescription): Json {
  const capabilities: Json = {};
  for (const [name, value] of Object.entries(child.capabilities)) {
    if (name === "tasks") continue;
    if (isObject(value)) {
      const { listChanged: _l, subscribe: _s, ...rest } = value;
      capabilities[name] = rest;
    } else capabilities[name] = value;
  }
  return modernResult(
    "server/discover",
    { supportedVersions: [...MODERN_VERSIONS], capabilities, ...(child.instructions === undefined ? {} : { instructions: child.instructions }) },
    child.serverInfo,
  );
}
