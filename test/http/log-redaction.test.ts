// The request log hides query values by default (attack trial, item 12): a token sent in a
// parameter nobody expected (`?transaction=`) or under an unknown name was written to the log
// because only known names were redacted. A real broker logs at trace level into a captured
// stream; only a short list of harmless parameters keeps its value.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { randomBytes } from "node:crypto";
import { createLogger, redactUrl } from "../../src/logger.ts";
import { freePort, startBroker, type TestBroker } from "../support/start-broker.ts";
import { until } from "../support/wait.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { INITIALIZE_MESSAGE, mcpPost } from "../support/mcp-probe.ts";

describe("redactUrl", () => {
  it.each([
    ["/plain", "/plain"],
    ["/token?transaction=T0KEN&foo=S3CRET", "/token?transaction=[redacted]&foo=[redacted]"],
    ["/cb?code=abc&state=xyz&x=1", "/cb?code=[redacted]&state=[redacted]&x=[redacted]"],
    [
      "/authorize?response_type=code&client_id=c1&redirect_uri=http%3A%2F%2F127.0.0.1%3A7777%2Fcallback&scope=mcp+profile&resource=http%3A%2F%2Fb%2Fmcp&code_challenge_method=S256&code_challenge=CH&state=ST&nonce=N",
      "/authorize?response_type=code&client_id=c1&redirect_uri=http%3A%2F%2F127.0.0.1%3A7777%2Fcallback&scope=mcp+profile&resource=http%3A%2F%2Fb%2Fmcp&code_challenge_method=S256&code_challenge=[redacted]&state=[redacted]&nonce=[redacted]",
    ],
    [
      "/oauth/callback?error=access_denied&error_description=Denied+for+x%40y&iss=https%3A%2F%2Fidp",
      "/oauth/callback?error=access_denied&error_description=[redacted]&iss=https%3A%2F%2Fidp",
    ],
    // A harmless name does not carry a URL's credentials, query or fragment, nor a token.
    ["/authorize?redirect_uri=https%3A%2F%2Fu%3Apw%40app.example%2Fcb%3Ftoken%3DT%23f", "/authorize?redirect_uri=https%3A%2F%2Fapp.example%2Fcb[redacted]"],
    ["/authorize?scope=mab_at_abcDEF123-_x", "/authorize?scope=[redacted]"],
    ["/mcp?client_id=http%3A%2F%2F%5Bbad", "/mcp?client_id=[redacted]"],
    // Names that are not parameter names (a bare token) go too; so does a known token shape in the path.
    ["/mcp?mab_at_abcdef", "/mcp?[redacted]=[redacted]"],
    ["/mcp?gho_0123456789abcdefghijABCDEFGHIJ0123456789=1&ok", "/mcp?[redacted]=[redacted]&[redacted]=[redacted]"],
    ["/mcp/mab_at_abc-_9?%zz=1&=2", "/mcp/[redacted]?[redacted]=[redacted]&[redacted]=[redacted]"],
    ["http://user:pass@host/x?scope=mcp", "http://host/x?scope=mcp"],
    // Names are compared as sent: SCOPE is not scope.
    ["/authorize?SCOPE=x&Client_Id=y", "/authorize?SCOPE=[redacted]&Client_Id=[redacted]"],
  ])("%s → %s", (url, expected) => {
    expect(redactUrl(url)).toBe(expected);
  });
});

describe("the logger hides sensitive fields", () => {
  function logged(write: (log: ReturnType<typeof createLogger>) => void): Array<Record<string, unknown>> {
    const lines: string[] = [];
    write(createLogger("info", { write: (line: string) => void lines.push(line) }));
    return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  it("on the logged object and two levels below it, in arrays too, whatever the case of the name", () => {
    const object = {
      authorization: "A0",
      headers: { Authorization: "A1", cookie: "C1", accept: "*/*" },
      req: { headers: { "set-cookie": "C2" } },
      list: [{ refresh_token: "R1" }],
      deeper: { a: { b: { code: "kept: three levels down, as before" } } },
    };
    const [line] = logged((log) => log.info(object, "x"));
    expect(line).toMatchObject({
      authorization: "[redacted]",
      headers: { Authorization: "[redacted]", cookie: "[redacted]", accept: "*/*" },
      req: { headers: { "set-cookie": "[redacted]" } },
      list: [{ refresh_token: "[redacted]" }],
      deeper: { a: { b: { code: "kept: three levels down, as before" } } },
    });
    // The caller's object is left as it was.
    expect(object.headers.Authorization).toBe("A1");
    expect(object.list[0]!.refresh_token).toBe("R1");
  });

  it("in an error's own fields, keeping its type, message and stack", () => {
    const err = Object.assign(new TypeError("boom"), { token: "T1", response: { client_secret: "S1" } });
    const [asField, asObject] = logged((log) => {
      log.error({ err, password: "P1" }, "failed");
      log.error(err, "failed");
    });
    for (const line of [asField, asObject]) {
      expect(line!.err).toMatchObject({ type: "TypeError", message: "boom", token: "[redacted]", response: { client_secret: "[redacted]" } });
      expect((line!.err as { stack: string }).stack).toContain("TypeError: boom");
    }
    expect(asField!.password).toBe("[redacted]");
    expect(err.token).toBe("T1");
  });
});

describe("fields named code", () => {
  function logged(write: (log: ReturnType<typeof createLogger>) => void): Array<Record<string, unknown>> {
    const lines: string[] = [];
    write(createLogger("info", { write: (line: string) => void lines.push(line) }));
    return lines.map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  it("show an error's code (what an operator acts on), and hide anything else, such as an authorization code", () => {
    const errorCodes = ["ECONNREFUSED", "UND_ERR_SOCKET", "HPE_INVALID_CHUNK_SIZE", "ERR_SSL_WRONG_VERSION_NUMBER", "invalid_grant", "aborted", 23];
    const oauthCodes = ["mab_ac_Q2hhbmdlTWU0NTY3ODkwYWJj", "a1b2c3d4e5f6a7b8c9d0", "4/0AanRRrt-example", "SplxlOBeZQQYbYS6WxSbIA"];
    const lines = logged((log) => {
      for (const code of [...errorCodes, ...oauthCodes]) log.info({ code }, "x");
      log.warn({ err: Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:9"), { code: "ECONNREFUSED" }) }, "failed");
    });
    expect(lines.slice(0, errorCodes.length).map((l) => l.code)).toEqual(errorCodes);
    expect(lines.slice(errorCodes.length, -1).map((l) => l.code)).toEqual(oauthCodes.map(() => "[redacted]"));
    expect((lines.at(-1)!.err as { code: string }).code).toBe("ECONNREFUSED");
  });

  it("an MCP server that refuses connections: the warning says ECONNREFUSED", async () => {
    const lines: string[] = [];
    const dead = await freePort();
    const t = await startBroker(
      { MCP_SERVER_URL: `http://127.0.0.1:${dead}/mcp`, LOG_LEVEL: "warn" },
      { logDestination: { write: (line: string) => void lines.push(line) } },
    );
    try {
      const { tokens } = await obtainTokens(t.url, { user: "codes" });
      const res = await mcpPost(t.url, tokens.access_token, INITIALIZE_MESSAGE);
      expect(res.status).toBe(502);
      await res.body?.cancel();
      const failed = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === "MCP server request failed");
      expect(failed).toMatchObject({ code: "ECONNREFUSED", err: expect.stringContaining("ECONNREFUSED") });
    } finally {
      await t.stop();
    }
  });
});

describe("the request log of a broker at trace level", () => {
  let t: TestBroker;
  let origin: string;
  let output = "";

  beforeAll(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    // With a path: the OAuth endpoints are served under /broker and without it.
    t = await startBroker(
      { PORT: String(port), PUBLIC_URL: `${origin}/broker`, LOG_LEVEL: "trace" },
      {
        logDestination: {
          write: (line: string) => {
            output += line;
          },
        },
      },
    );
  });

  afterAll(async () => t.stop());

  it("never shows a token sent in ?transaction= or under an unknown name, on any path", async () => {
    const secrets: string[] = [];
    const secret = (label: string) => {
      const value = `${label}${randomBytes(12).toString("hex")}`;
      secrets.push(value);
      return value;
    };
    const paths = [
      "/authorize",
      "/broker/authorize",
      "/consent",
      "/broker/consent",
      "/oauth/callback",
      "/broker/oauth/callback",
      "/token",
      "/register",
      "/revoke",
      "/introspect",
      "/mcp",
      "/broker/mcp",
      "/healthz",
      "/nowhere",
    ];
    for (const p of paths) {
      const query = `transaction=${secret("tx")}&unexpected_param=${secret("up")}&${secret("bare")}&response_type=code&client_id=visible-client`;
      await fetch(`${origin}${p}?${query}`, {
        method: p === "/token" || p === "/register" || p === "/revoke" || p === "/introspect" ? "POST" : "GET",
        redirect: "manual",
      });
    }
    // A request is logged when its response finishes: look only once every line is there, or "no
    // secret in the output" would pass without looking.
    const logged = () => output.split("\n").filter((line) => /"msg":"(request|mcp)"/.test(line)).length;
    await until(() => logged() >= paths.length, "a line for every request");

    for (const s of secrets) expect([s, output.includes(s)]).toEqual([s, false]);
    const requestLines = output
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { msg?: string; url?: string })
      // The request lines, and the MCP endpoint's access lines.
      .filter((entry) => entry.msg === "request" || entry.msg === "mcp");
    // Every request was logged, with its harmless parameters and the hidden ones marked.
    for (const p of paths) {
      const line = requestLines.find((entry) => entry.url?.startsWith(`${p}?`));
      expect([p, line?.url]).toEqual([
        p,
        `${p}?transaction=[redacted]&unexpected_param=[redacted]&[redacted]=[redacted]&response_type=code&client_id=visible-client`,
      ]);
    }
  });
});
