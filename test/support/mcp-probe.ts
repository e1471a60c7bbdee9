// Raw requests to the broker's /mcp with a bearer token, for tests that look at the HTTP answer
// itself; and the one-request probe "does /mcp accept this token?".
export const INITIALIZE_MESSAGE = {
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } },
} as const;

/** POSTs one JSON-RPC message to the MCP endpoint at `url`, as a Streamable HTTP client does. */
export function mcpPostTo(url: string, accessToken: string, message: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
    body: JSON.stringify(message),
  });
}

/** POSTs one JSON-RPC message to `origin`/mcp; within `session` (with its protocol version) when given. */
export function mcpPost(origin: string, accessToken: string, message: unknown, session?: string): Promise<Response> {
  return mcpPostTo(`${origin}/mcp`, accessToken, message, session ? { "mcp-session-id": session, "mcp-protocol-version": "2025-06-18" } : {});
}

/** An initialize message as `clientInfo` would send it, for replays of named clients. */
export function initializeAs(clientInfo: { name: string; version: string }, protocolVersion = "2025-06-18") {
  return { ...INITIALIZE_MESSAGE, params: { protocolVersion, capabilities: {}, clientInfo } };
}

/** The status the broker at `origin` answers an MCP initialize carrying `accessToken` with. */
export async function mcpStatus(origin: string, accessToken: string): Promise<number> {
  const res = await mcpPost(origin, accessToken, INITIALIZE_MESSAGE);
  await res.body?.cancel();
  return res.status;
}
