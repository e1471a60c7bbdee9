// `check` for the MCP server the broker fronts: a real MCP `initialize` over Streamable HTTP, as a
// client's first request would reach it through the broker. Any HTTP answer is not enough: a
// 404/405 means MCP_SERVER_URL names something that is not an MCP endpoint.
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import type { Config } from "../config.ts";
import { describeNetworkFailure } from "../outbound/network-failure.ts";

export interface CheckResult {
  readonly check: string;
  readonly ok: boolean;
  readonly detail: string;
}

interface InitializeResult {
  readonly protocolVersion?: string;
  readonly serverInfo?: { readonly name?: string; readonly version?: string };
}

/** The JSON-RPC answer with id 1, from a JSON body or an SSE stream of them. */
function initializeAnswer(contentType: string, body: string): { result?: InitializeResult; error?: { message?: string } } | undefined {
  const messages = contentType.includes("text/event-stream")
    ? body
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trim())
    : [body];
  for (const text of messages) {
    try {
      const message = JSON.parse(text) as { id?: unknown; result?: InitializeResult; error?: { message?: string } };
      if (message.id === 1) return message;
    } catch {
      // Not JSON: not an MCP answer.
    }
  }
  return undefined;
}

const fail = (detail: string): CheckResult => ({ check: "MCP server", ok: false, detail });

export async function checkMcpServer(config: Config, version: string): Promise<CheckResult> {
  if (config.stdioServer)
    return {
      check: "MCP server",
      ok: true,
      detail: `MCP_SERVER_COMMAND ${config.stdioServer.command}: started per MCP session, as its user (not started by check)`,
    };
  const url = config.mcpServerUrl;
  if (!url) return { check: "MCP server", ok: true, detail: "MCP_SERVER_URL is not set: the built-in demo MCP server is used" };
  const signal = AbortSignal.timeout(config.proxyTimeoutMs);
  let res: Response;
  let body: string;
  try {
    res = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "mcp-auth-broker check", version } },
      }),
      signal,
    });
    body = await res.text();
  } catch (err) {
    const why = describeNetworkFailure(err, "the MCP server", "MCP_SERVER_URL") ?? `${(err as Error).message}; start the MCP server or correct MCP_SERVER_URL`;
    return fail(`cannot reach ${url}: ${why}`);
  }
  // Leave no session behind on the MCP server.
  const session = res.headers.get("mcp-session-id");
  if (session)
    await fetch(url, { method: "DELETE", headers: { "mcp-session-id": session }, signal }).then(
      (r) => r.body?.cancel(),
      () => undefined,
    );

  if (res.status === 404 || res.status === 405)
    return fail(
      `${url} answers HTTP ${res.status} to an MCP initialize: there is no MCP (Streamable HTTP) endpoint at that path; correct the path in MCP_SERVER_URL (often …/mcp)`,
    );
  if (res.status === 401 || res.status === 403)
    return fail(
      `${url} answers HTTP ${res.status}: the MCP server asks for its own authorization; the broker authenticates every caller itself, so let the MCP server accept the broker's requests`,
    );
  if (!res.ok) return fail(`${url} answers HTTP ${res.status} to an MCP initialize: look at the MCP server's log`);
  const answer = initializeAnswer(res.headers.get("content-type") ?? "", body);
  if (answer?.error) return fail(`${url} refused the MCP initialize: ${answer.error.message ?? "an error"}`);
  const info = answer?.result?.serverInfo;
  if (!info) return fail(`${url} answers HTTP ${res.status}, but not with an MCP initialize result: is MCP_SERVER_URL the MCP endpoint?`);
  return {
    check: "MCP server",
    ok: true,
    detail: `${url} is an MCP server: ${[info.name ?? "unnamed", info.version].filter(Boolean).join(" ")}, protocol ${answer.result?.protocolVersion ?? "?"}`,
  };
}
