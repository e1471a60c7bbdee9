// The JSON-RPC method names of an MCP request body, for the access log: scanned, not parsed (the
// hot path must not pay a JSON parse per request), bounded in length and number.

const METHOD = /"method"\s*:\s*"([A-Za-z0-9_/.$-]{1,64})"/g;
const SCANNED_BYTES = 8192;
const MAX_METHODS = 8;

/** `["tools/call"]`, or one name per message of a batch; empty for a response or a non-JSON body. */
export function rpcMethods(body: Buffer | null): string[] {
  if (!body || body.length === 0) return [];
  const text = body.subarray(0, SCANNED_BYTES).toString("utf8");
  const names: string[] = [];
  for (const match of text.matchAll(METHOD)) {
    names.push(match[1]!);
    if (names.length === MAX_METHODS) break;
  }
  return names;
}
