// Shared by the stdio fronting tests: a broker in front of the fixture stdio server (or another
// command), users signing in through the real SDK client, and waiting on child processes.
import path from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";
import { answerAs, HttpBrowser } from "../support/http-browser.ts";
import { type CallbackServer, connectWithOAuth, type ConnectedClient } from "../support/mcp-oauth-client.ts";
import { projectRoot } from "../support/spawn.ts";
import { obtainTokens } from "../support/oauth-flow.ts";

/** MCP_SERVER_COMMAND running the fixture server with this very Node. */
export const fixtureCommand = `"${process.execPath}" "${path.join(projectRoot, "test/fixtures/stdio-server.js")}"`;

/** The environment of a broker fronting the fixture, its token in UPSTREAM_TOKEN. */
export const fixtureEnv = (extra: Record<string, string> = {}): Record<string, string> => ({
  MCP_SERVER_COMMAND: fixtureCommand,
  MCP_SERVER_TOKEN_ENV: "UPSTREAM_TOKEN",
  ...extra,
});

/** `user` signs in at the demo IdP and consents, as the SDK client's OAuth flow asks. */
export function signInAs(user: string, callback: CallbackServer): (url: URL) => Promise<void> {
  return async (url) => {
    const back = await new HttpBrowser().walk(url.href, callback.url, answerAs(user));
    await fetch(back);
  };
}

/** The real SDK client, through its real OAuth flow, as `user`. */
export function connectAs(brokerUrl: string, user: string, callback: CallbackServer): Promise<ConnectedClient> {
  return connectWithOAuth(`${brokerUrl}/mcp`, callback, signInAs(user, callback));
}

export interface Whoami {
  readonly token: string | null;
  readonly pid: number;
  readonly environment: string[];
}

export async function callText(client: Client, name: string, args: Record<string, unknown> = {}): Promise<string> {
  const result = CallToolResultSchema.parse(await client.callTool({ name, arguments: args }));
  const first = result.content[0];
  if (first?.type !== "text") throw new Error(`${name} answered no text: ${JSON.stringify(result)}`);
  return first.text;
}

export const whoami = async (client: Client): Promise<Whoami> => JSON.parse(await callText(client, "whoami")) as Whoami;

export async function disconnect(c: ConnectedClient | undefined): Promise<void> {
  await c?.transport.terminateSession().catch(() => undefined);
  await c?.client.close();
}

/** A bearer token for `user` (the OAuth flow without the SDK), for raw HTTP tests. */
export async function bearerFor(brokerUrl: string, user: string): Promise<Record<string, string>> {
  const { tokens } = await obtainTokens(brokerUrl, { user });
  return { authorization: `Bearer ${tokens.access_token}` };
}

export const MCP_HEADERS = { "content-type": "application/json", accept: "application/json, text/event-stream" } as const;

/** A raw MCP initialize (no session id yet): the broker's answer, unread. */
export function initializeRequest(mcpUrl: string, auth: Record<string, string>, protocolVersion = "2025-06-18"): Promise<Response> {
  return fetch(mcpUrl, {
    method: "POST",
    headers: { ...MCP_HEADERS, ...auth },
    body: JSON.stringify({
      jsonrpc: "2.0",
      id: 0,
      method: "initialize",
      params: { protocolVersion, capabilities: { sampling: {} }, clientInfo: { name: "raw", version: "1" } },
    }),
  });
}

/** initialize + initialized over raw HTTP; returns the session id. */
export async function openSession(mcpUrl: string, auth: Record<string, string>, protocolVersion = "2025-06-18"): Promise<string> {
  const res = await initializeRequest(mcpUrl, auth, protocolVersion);
  await res.text();
  const id = res.headers.get("mcp-session-id");
  if (res.status !== 200 || !id) throw new Error(`initialize answered ${res.status}`);
  const note = await fetch(mcpUrl, {
    method: "POST",
    headers: { ...MCP_HEADERS, ...auth, "mcp-session-id": id, "mcp-protocol-version": protocolVersion },
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await note.text();
  return id;
}

/** Whether a process is alive (signal 0). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The JSON-RPC messages of an SSE response body, as they arrive. */
export async function* sseMessages(res: Response): AsyncGenerator<Record<string, unknown>> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = event
          .split("\n")
          .filter((l) => l.startsWith("data:"))
          .map((l) => l.slice(5).trim())
          .join("\n");
        if (data) yield JSON.parse(data) as Record<string, unknown>;
      }
    }
  } finally {
    reader.releaseLock();
    await res.body!.cancel().catch(() => undefined);
  }
}

/** The next message of an SSE stream that satisfies `match`. */
export async function nextMessage(
  stream: AsyncGenerator<Record<string, unknown>>,
  match: (m: Record<string, unknown>) => boolean = () => true,
): Promise<Record<string, unknown>> {
  for (;;) {
    const { value, done } = await stream.next();
    if (done) throw new Error("the stream ended first");
    if (match(value)) return value;
  }
}
