// Is MCP_SERVER_URL an MCP server that will take the broker's requests? A real MCP `initialize`
// over Streamable HTTP, as a client's first request reaches it through the broker, sent with undici
// like the proxy's own requests (so a port or address the proxy can use is not refused here, and
// the other way round). Any HTTP answer is not enough: outbound/mcp-server-answer.ts says what a
// 401, 404, 405, 501 or an HTML page means. `check` prints the finding; the broker logs it at start.
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import { Agent } from "undici";
import { describeNetworkFailure } from "../lib/network-failure.ts";
import { misfitOf } from "../outbound/mcp-server-answer.ts";
import type { Config } from "../config/load.ts";
import type { Finding } from "./finding.ts";
import { firstLine } from "../lib/error-text.ts";

export interface McpServerTarget {
  /** MCP_SERVER_URL. */
  readonly url: string;
  /** FORWARD_UPSTREAM_TOKEN: a 401 may then be about the user's token, which the probe has none of. */
  readonly forwardsUpstreamToken: boolean;
  /** How long the probe waits for an answer. */
  readonly timeoutMs: number;
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

const CHECK = "MCP server";
const fail = (detail: string): Finding => ({ check: CHECK, ok: false, detail });
const header = (value: string | string[] | undefined): string | undefined => (Array.isArray(value) ? value[0] : value);

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** The initialize sent; a Finding when it got no answer at all. */
async function sendInitialize(agent: Agent, url: string, version: string, signal: AbortSignal): Promise<Answer | Finding> {
  try {
    const res = await agent.request({
      origin: new URL(url).origin,
      path: `${new URL(url).pathname}${new URL(url).search}`,
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
    return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
  } catch (err) {
    const why = describeNetworkFailure(err, "the MCP server", "MCP_SERVER_URL") ?? `${firstLine(err)}; start the MCP server or correct MCP_SERVER_URL`;
    return fail(`cannot reach ${url}: ${why}`);
  }
}

/** What the answer to an initialize says about the server. */
function findingOf(target: McpServerTarget, { status, headers, body }: Answer): Finding {
  const { url } = target;
  const contentType = header(headers["content-type"]) ?? "";
  const misfit = misfitOf({
    status,
    method: "POST",
    contentType,
    wwwAuthenticate: headers["www-authenticate"],
    sessionSent: false,
    tokenSent: target.forwardsUpstreamToken,
  });
  if (misfit) return fail(`${url} answered ${misfit.meaning}`);
  if (status === 401 && target.forwardsUpstreamToken)
    return {
      check: CHECK,
      ok: true,
      detail: `${url} answers HTTP 401 without a user's upstream token; with FORWARD_UPSTREAM_TOKEN=true it receives the signed-in user's`,
    };
  if (status < 200 || status >= 300) return fail(`${url} answered HTTP ${status} to an MCP initialize: look at the MCP server's log`);
  const answer = initializeAnswer(contentType, body);
  if (answer?.error) return fail(`${url} refused the MCP initialize: ${answer.error.message ?? "an error"}`);
  const info = answer?.result?.serverInfo;
  if (!info)
    return fail(
      `${url} answered HTTP ${status}, but not with an MCP initialize result: it is not an MCP endpoint; is the path in MCP_SERVER_URL right (often …/mcp)?`,
    );
  return {
    check: CHECK,
    ok: true,
    detail: `${url} is an MCP server: ${[info.name ?? "unnamed", info.version].filter(Boolean).join(" ")}, protocol ${answer.result?.protocolVersion ?? "?"}`,
  };
}

export async function probeMcpServer(target: McpServerTarget, version: string): Promise<Finding> {
  const { url } = target;
  const agent = new Agent({ connect: { timeout: target.timeoutMs } });
  const signal = AbortSignal.timeout(target.timeoutMs);
  try {
    const answer = await sendInitialize(agent, url, version, signal);
    if ("check" in answer) return answer;
    // Leave no session behind on the MCP server.
    const session = header(answer.headers["mcp-session-id"]);
    if (session)
      await agent.request({ origin: new URL(url).origin, path: new URL(url).pathname, method: "DELETE", headers: { "mcp-session-id": session }, signal }).then(
        (r) => r.body.dump(),
        () => undefined,
      );
    return findingOf(target, answer);
  } finally {
    await agent.close().catch(() => undefined);
  }
}

/** The longest a probe waits: a black-holed address must not hold `check` for PROXY_TIMEOUT_SECONDS. */
const PROBE_TIMEOUT_MS = 10_000;

/**
 * The MCP server the configuration names, probed; undefined when there is nothing to say (no
 * server outside demo mode is a configuration problem, reported as such).
 */
export async function checkMcpServer(config: Config, version: string): Promise<Finding | undefined> {
  if (config.stdioServer)
    return {
      check: CHECK,
      ok: true,
      detail: `MCP_SERVER_COMMAND ${config.stdioServer.command}: started per MCP session, as its user (not started by check)`,
    };
  if (!config.mcpServerUrl)
    return config.demoMode ? { check: CHECK, ok: true, detail: "MCP_SERVER_URL is not set: the built-in demo MCP server is used" } : undefined;
  return probeMcpServer(
    { url: config.mcpServerUrl, forwardsUpstreamToken: config.forwardUpstreamToken, timeoutMs: Math.min(config.proxyTimeoutMs, PROBE_TIMEOUT_MS) },
    version,
  );
}
