// The one-request probe many tests use to ask "does /mcp accept this token?": an MCP initialize,
// answered with its status (the body, often a stream, is not read).
const INITIALIZE = JSON.stringify({
  jsonrpc: "2.0",
  id: 1,
  method: "initialize",
  params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "probe", version: "1" } },
});

/** The status the broker at `origin` answers an MCP initialize carrying `accessToken` with. */
export async function mcpStatus(origin: string, accessToken: string): Promise<number> {
  const res = await fetch(`${origin}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: INITIALIZE,
  });
  await res.body?.cancel();
  return res.status;
}
