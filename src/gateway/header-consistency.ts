// MCP 2026-07-28 mirrors body fields into request headers (Mcp-Method, Mcp-Name,
// MCP-Protocol-Version) so that intermediaries can route without parsing the body; a component
// that reads the body MUST refuse a request whose headers say something else (streamable-http,
// "Server Validation"), or a router trusting the header and a server trusting the body would act
// on two different requests. The broker reads the body (access log, tool rules), so it checks
// what it reads, before anything is forwarded. Both backends call this one function.
//
// Only present headers are compared: a missing one is the MCP server's to refuse (2025 clients
// send none). Mcp-Param-* headers are the MCP server's too: which argument each mirrors is in the
// tool's schema, which the broker does not read.
import type { IncomingHttpHeaders } from "node:http";

/** HeaderMismatch (streamable-http "Server Validation"): answered with HTTP 400. */
export const HEADER_MISMATCH = -32020;

/** The body field Mcp-Name mirrors, per method (the table the SDK v2 client and server share). */
const NAME_SOURCE: Readonly<Record<string, string>> = {
  "tools/call": "name",
  "prompts/get": "name",
  "resources/read": "uri",
  "tasks/get": "taskId",
  "tasks/update": "taskId",
  "tasks/cancel": "taskId",
};
const PROTOCOL_VERSION_META = "io.modelcontextprotocol/protocolVersion";

const SENTINEL_PREFIX = "=?base64?";
const SENTINEL_SUFFIX = "?=";
const CANONICAL_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A header value as the client meant it: the `=?base64?…?=` sentinel decoded (UTF-8), any other
 * value as sent. Undefined when the sentinel carries no canonical Base64 or no valid UTF-8.
 */
export function decodeHeaderValue(value: string): string | undefined {
  if (!value.startsWith(SENTINEL_PREFIX) || !value.endsWith(SENTINEL_SUFFIX) || value.length < SENTINEL_PREFIX.length + SENTINEL_SUFFIX.length) {
    return value;
  }
  const payload = value.slice(SENTINEL_PREFIX.length, -SENTINEL_SUFFIX.length);
  if (!CANONICAL_BASE64.test(payload)) return undefined;
  try {
    return utf8.decode(Buffer.from(payload, "base64"));
  } catch {
    return undefined;
  }
}

/** Whether the request mirrors body fields into headers: only then is the body worth parsing. */
export function mirrorsBody(headers: IncomingHttpHeaders): boolean {
  return headers["mcp-method"] !== undefined || headers["mcp-name"] !== undefined;
}

/** The body field Mcp-Name mirrors for `method` (`name` for tools/call); undefined for the others. */
export function nameField(method: unknown): string | undefined {
  return typeof method === "string" && Object.hasOwn(NAME_SOURCE, method) ? NAME_SOURCE[method] : undefined;
}

/** A value for an error message: bounded, so a client cannot make the broker echo megabytes. */
export const shown = (value: unknown): string => {
  const text = typeof value === "string" ? value : (JSON.stringify(value) ?? String(value));
  return JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);
};

/** Node joins a repeated header into one value; typed as possibly a list all the same. */
const single = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value.join(", ") : value);

const isObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * What disagrees between the request's headers and its parsed JSON-RPC body, as the message of a
 * HeaderMismatch error; undefined when nothing does.
 */
export function headerMismatch(headers: IncomingHttpHeaders, message: unknown): string | undefined {
  const method = single(headers["mcp-method"]);
  const name = single(headers["mcp-name"]);
  const version = single(headers["mcp-protocol-version"]);
  if (method === undefined && name === undefined && version === undefined) return undefined;
  if (!isObject(message)) {
    if (method === undefined && name === undefined) return undefined;
    return Array.isArray(message)
      ? "Header mismatch: Mcp-Method and Mcp-Name mirror a single JSON-RPC message, and the body is a batch."
      : "Header mismatch: the body is not a JSON-RPC message the Mcp-Method and Mcp-Name headers could mirror.";
  }
  const params = isObject(message.params) ? message.params : undefined;
  if (method !== undefined && method !== message.method) {
    return `Header mismatch: Mcp-Method header value ${shown(method)} does not match body value ${shown(message.method ?? "(none)")}.`;
  }
  if (name !== undefined) {
    const decoded = decodeHeaderValue(name);
    if (decoded === undefined) return "Header mismatch: the Mcp-Name header carries an invalid =?base64?…?= value.";
    const field = nameField(message.method);
    const body = field === undefined ? undefined : params?.[field];
    if (typeof body === "string" && decoded !== body) {
      return `Header mismatch: Mcp-Name header value ${shown(decoded)} does not match body value ${shown(body)} (params.${field}).`;
    }
  }
  const meta = isObject(params?._meta) ? params._meta : undefined;
  const claimed = meta?.[PROTOCOL_VERSION_META];
  if (version !== undefined && claimed !== undefined && version !== claimed) {
    return `Header mismatch: MCP-Protocol-Version header value ${shown(version)} does not match body value ${shown(claimed)} (_meta).`;
  }
  return undefined;
}

/** The id to answer a refused message with: its own when it has one JSON-RPC allows, else null. */
export function requestId(message: unknown): string | number | null {
  const id = isObject(message) ? message.id : undefined;
  return typeof id === "string" || typeof id === "number" ? id : null;
}
