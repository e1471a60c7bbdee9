// What an HTTP answer of the protected MCP server means when it is not one an MCP server gives a
// caller the broker has already authorized: it asks for an authorization of its own, or the URL is
// not an MCP endpoint at all. One reading for `check`, the start-up probe and the proxy at run time
// (the proxy warns the operator, once in a while, instead of letting a client loop through logins).

/** The answer, and what the broker had sent. */
export interface McpServerAnswer {
  readonly status: number;
  /** The request's HTTP method (GET opens a stream, which a server may refuse with 405). */
  readonly method: string;
  readonly contentType: string | undefined;
  readonly wwwAuthenticate: string | string[] | undefined;
  /** The request named an MCP session: a 404 then says the session ended, which clients handle. */
  readonly sessionSent: boolean;
  /** The broker forwarded the user's upstream token (FORWARD_UPSTREAM_TOKEN): a 401/403 may be about it. */
  readonly tokenSent: boolean;
}

export interface Misfit {
  /** One kind per cause, so that each is reported once in a while, not once per request. */
  readonly kind: "own-authorization" | "refused" | "no-endpoint" | "not-mcp";
  /** What it means and what to change, after "<url> answered …". */
  readonly meaning: string;
}

const NO_ENDPOINT = "there is no MCP (Streamable HTTP) endpoint at that path; correct the path in MCP_SERVER_URL (often …/mcp)";

function isScopeChallenge(header: string | string[] | undefined): boolean {
  return [header ?? []].flat().some((value) => /\berror\s*=\s*"?insufficient_scope\b/i.test(value));
}

/** Undefined for any answer an MCP server may give (success, its own JSON-RPC errors, a step-up challenge…). */
export function misfitOf(answer: McpServerAnswer): Misfit | undefined {
  const { status, method } = answer;
  if (status === 401 && !answer.tokenSent)
    return {
      kind: "own-authorization",
      meaning:
        "HTTP 401: the MCP server asks for an authorization of its own, but the broker sends it no token (it authenticates every caller itself); let the MCP server accept the broker's requests (it names the caller in X-Auth-* headers), or set FORWARD_UPSTREAM_TOKEN=true if it needs the user's upstream token",
    };
  if (status === 403 && !answer.tokenSent && !isScopeChallenge(answer.wwwAuthenticate))
    return {
      kind: "refused",
      meaning:
        'HTTP 403 to a caller the broker authorized: if the MCP server checks an authorization of its own, let it accept the broker\'s requests (it names the caller in X-Auth-* headers); a server that wants more scope answers 403 with WWW-Authenticate: Bearer error="insufficient_scope"',
    };
  if (status === 404 && !answer.sessionSent) return { kind: "no-endpoint", meaning: `HTTP 404: ${NO_ENDPOINT}` };
  // A GET (the optional event stream) or DELETE (ending a session) may be refused by an MCP server.
  if (status === 405 && method === "POST") return { kind: "no-endpoint", meaning: `HTTP 405 to a POST: ${NO_ENDPOINT}` };
  if (status === 501)
    return { kind: "not-mcp", meaning: "HTTP 501 (Not Implemented): it is not an MCP endpoint; is the path in MCP_SERVER_URL right (often …/mcp)?" };
  if (method === "POST" && /^text\/html\b/i.test(answer.contentType ?? ""))
    return { kind: "not-mcp", meaning: `an HTML page (HTTP ${status}): it is not an MCP endpoint; is the path in MCP_SERVER_URL right (often …/mcp)?` };
  return undefined;
}
