// An MCP server behind the broker that answers what no working setup answers (it wants its own
// authorization, or MCP_SERVER_URL names a plain web server): the client only sees its request
// fail, so the operator is told in the log what it means, once per cause, not once per request.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { obtainTokens } from "../support/oauth-flow.ts";
import { INITIALIZE_MESSAGE, mcpPost } from "../support/mcp-probe.ts";
import { startLoggedBroker, type LoggedBroker, type LogLine } from "../http/logged-broker.ts";
import { misfitOf, type McpServerAnswer } from "../../src/outbound/mcp-server-answer.ts";
import { misfitWarnings } from "../../src/gateway/mcp-server-misfits.ts";
import { createLogger } from "../../src/logger.ts";

const WARN = 40;

/** What a web server that is not an MCP server answers: the status `answer` says, for every request. */
let answer: { status: number; headers?: Record<string, string>; body?: string } = { status: 401 };
let server: Server;
let t: LoggedBroker;
let mcpUrl: string;

beforeAll(async () => {
  server = createServer((req, res) => {
    req.resume();
    res.writeHead(answer.status, answer.headers ?? {}).end(answer.body ?? "");
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  mcpUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
  t = await startLoggedBroker({ MCP_SERVER_URL: mcpUrl });
});
afterAll(async () => {
  await t.stop();
  await new Promise((resolve) => server.close(resolve));
});

const warnings = (about: RegExp): LogLine[] => t.logs.filter((l) => l.level === WARN && about.test(l.msg));

describe("the MCP server's answers that make no sense behind the broker", () => {
  it("a server that always answers 401 (it wants its own authorization): one warning saying so and what to change, not one per request", async () => {
    answer = { status: 401, headers: { "www-authenticate": 'Bearer realm="own"' } };
    const { tokens } = await obtainTokens(t.url, { user: "ops" });
    for (let i = 0; i < 3; i++) {
      const res = await mcpPost(t.url, tokens.access_token, INITIALIZE_MESSAGE);
      await res.body?.cancel();
      // What the client sees is unchanged: the broker's own challenge.
      expect(res.status).toBe(401);
    }
    const lines = warnings(/asks for an authorization of its own/);
    expect(lines).toHaveLength(1);
    expect(lines[0]!.msg).toBe(
      `the MCP server ${mcpUrl} answered HTTP 401: the MCP server asks for an authorization of its own, but the broker sends it no token (it authenticates every caller itself); let the MCP server accept the broker's requests (it names the caller in X-Auth-* headers), or set FORWARD_UPSTREAM_TOKEN=true if it needs the user's upstream token`,
    );
  });

  it("a plain web server (501 to a POST, an HTML page): a warning that it is not an MCP endpoint", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "ops2" });
    answer = { status: 501, headers: { "content-type": "text/html" }, body: "<h1>Unsupported method ('POST')</h1>" };
    const res = await mcpPost(t.url, tokens.access_token, INITIALIZE_MESSAGE);
    await res.body?.cancel();
    expect(res.status).toBe(501);
    expect(warnings(/HTTP 501 \(Not Implemented\): it is not an MCP endpoint; is the path in MCP_SERVER_URL right/)).toHaveLength(1);
  });
});

describe("which answers are misfits", () => {
  const base: McpServerAnswer = {
    status: 200,
    method: "POST",
    contentType: "application/json",
    wwwAuthenticate: undefined,
    sessionSent: false,
    tokenSent: false,
  };
  it.each<[string, Partial<McpServerAnswer>, string | undefined]>([
    ["a JSON answer", {}, undefined],
    ["401 without a token sent", { status: 401 }, "own-authorization"],
    // With FORWARD_UPSTREAM_TOKEN the user's token may have expired: the broker's challenge is right.
    ["401 with the user's upstream token sent", { status: 401, tokenSent: true }, undefined],
    ["403 step-up challenge", { status: 403, wwwAuthenticate: 'Bearer error="insufficient_scope", scope="docs:write"' }, undefined],
    ["403 without a scope challenge", { status: 403 }, "refused"],
    ["404 without a session", { status: 404 }, "no-endpoint"],
    // An ended session: clients start a new one (Streamable HTTP).
    ["404 to a request of a session", { status: 404, sessionSent: true }, undefined],
    ["405 to a POST", { status: 405 }, "no-endpoint"],
    // A server without the optional GET stream, or that does not let clients end sessions.
    ["405 to a GET", { status: 405, method: "GET" }, undefined],
    ["405 to a DELETE", { status: 405, method: "DELETE" }, undefined],
    ["501", { status: 501 }, "not-mcp"],
    ["an HTML page", { contentType: "text/html; charset=utf-8" }, "not-mcp"],
  ])("%s", (_, change, kind) => {
    expect(misfitOf({ ...base, ...change })?.kind).toBe(kind);
  });

  it("warns again about a cause after ten minutes, with how many were not logged", () => {
    const lines: LogLine[] = [];
    let now = 0;
    const seen = misfitWarnings({
      logger: createLogger("warn", { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) }),
      targetUrl: "http://mcp.internal/mcp",
      now: () => now,
    });
    const unauthorized: McpServerAnswer = {
      status: 401,
      method: "POST",
      contentType: undefined,
      wwwAuthenticate: undefined,
      sessionSent: false,
      tokenSent: false,
    };
    seen(unauthorized);
    now += 60_000;
    seen(unauthorized);
    seen({ ...unauthorized, status: 501 });
    expect(lines.map((l) => [l.status, l.notLoggedSince])).toEqual([
      [401, undefined],
      [501, undefined],
    ]);
    now += 10 * 60_000;
    seen(unauthorized);
    expect(lines.map((l) => [l.status, l.notLoggedSince])).toEqual([
      [401, undefined],
      [501, undefined],
      [401, 1],
    ]);
  });
});
