// Request bodies at the OAuth endpoints that are too large, malformed or too slow, sent byte by
// byte over raw sockets: the client gets its answer (413, 400, 408 as OAuth JSON with
// Connection: close) instead of a reset, the connection is then closed, and a client's mistake is
// logged at info, never as an unexpected error.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { receivingCount, setSlowClientLimits } from "../../src/http/slow-requests.ts";
import { ERROR_LEVEL, startLoggedBroker, type LoggedBroker } from "./logged-broker.ts";
import { head, rawRequest } from "./raw-http.ts";
import { until, within } from "../support/wait.ts";

const BODY_DEADLINE_MS = 400;
let t: LoggedBroker;
let host: string;

beforeAll(async () => {
  t = await startLoggedBroker();
  host = new URL(t.url).host;
  setSlowClientLimits(t.broker.app, { bodyDeadlineMs: BODY_DEADLINE_MS });
});
afterAll(async () => {
  await t.stop();
});

const FORM = "application/x-www-form-urlencoded";

function expectOAuthJson(res: { status: number; headers: Record<string, string>; body: string }, status: number) {
  expect(res.status).toBe(status);
  expect(res.headers["content-type"]).toContain("application/json");
  expect(res.headers.connection).toBe("close");
  const body = JSON.parse(res.body) as Record<string, unknown>;
  expect(body).toEqual({ error: "invalid_request", error_description: expect.any(String) });
  return body;
}

function unexpectedErrors() {
  return t.logs.filter((l) => l.level >= ERROR_LEVEL);
}

describe("bodies over the limit", () => {
  it("answers a 3 MB chunked body at /token with 413 OAuth JSON, received whole, then closes", async () => {
    const ex = rawRequest(t.url, head("POST", "/token", { host, "content-type": FORM, "transfer-encoding": "chunked" }));
    const body = Buffer.alloc(3 * 1024 * 1024, "a");
    ex.write(`${body.length.toString(16)}\r\n`);
    ex.write(body);
    ex.write("\r\n0\r\n\r\n");
    const res = await within(ex.response, 5000, "the 413 response");
    const json = expectOAuthJson(res, 413);
    expect(json.error_description).toMatch(/too large/);
    await within(ex.closed, 5000, "the broker to close the connection");
    expect(unexpectedErrors()).toEqual([]);
  });

  it("answers a declared Content-Length over the limit with 413 and Connection: close without reading it", async () => {
    const ex = rawRequest(t.url, head("POST", "/token", { host, "content-type": FORM, "content-length": String(3 * 1024 * 1024) }), "grant_type=");
    const res = await within(ex.response, 5000, "the 413 response");
    expectOAuthJson(res, 413);
    await within(ex.closed, 5000, "the broker to close the connection");
  });
});

describe("malformed bodies", () => {
  it("a malformed chunked body at /register: the client gets 400 and nothing is logged as an error", async () => {
    const ex = rawRequest(
      t.url,
      head("POST", "/register", { host, "content-type": "application/json", "transfer-encoding": "chunked" }),
      '5\r\n{"a":\r\nZZZ-not-a-chunk-size\r\n',
    );
    const res = await within(ex.response, 5000, "the 400 response");
    expect(res.status).toBe(400);
    await within(ex.closed, 5000, "the connection to close");
    // The request's own line tells that it ended; by then the error middleware has logged whatever it logs.
    const line = await within(
      t.logged((l) => l.msg === "request" && l.url === "/register"),
      5000,
      "the request log line",
    );
    expect(line.status).toBe(400);
    expect(unexpectedErrors()).toEqual([]);
    const reported = t.logs.find((l) => l.msg === "client request body failed");
    expect(reported).toMatchObject({ level: 30 });
  });

  it("a client that hangs up in the middle of its body at /token is logged at info, not as an error", async () => {
    const ex = rawRequest(t.url, head("POST", "/token", { host, "content-type": FORM, "content-length": "100", "user-agent": "hangs-up" }), "grant_type=");
    // Hang up once the token handler is reading the body (it then holds one of the address's places).
    await until(() => receivingCount(t.broker.app, "127.0.0.1") === 1, "the body to be read");
    ex.destroy();
    const line = await within(
      t.logged((l) => l.msg === "request" && l.url === "/token" && l.status === 400),
      5000,
      "the request log line",
    );
    expect(t.logs.filter((l) => l.msg === "client request body failed" && l.requestId === line.requestId)).toMatchObject([{ level: 30 }]);
    expect(unexpectedErrors()).toEqual([]);
    await until(() => receivingCount(t.broker.app, "127.0.0.1") === 0, "the place to be given back");
  });
});

describe("slow bodies", () => {
  it.each([
    ["/token", FORM, { "content-length": "200" }],
    ["/token", FORM, { "transfer-encoding": "chunked" }],
    ["/register", "application/json", { "content-length": "200" }],
  ] as Array<[string, string, Record<string, string>]>)(
    "answers a body trickled to %s (%s, %j) with 408 within the body deadline and closes",
    async (path, type, framing) => {
      const started = Date.now();
      const chunked = framing["transfer-encoding"] === "chunked";
      const ex = rawRequest(t.url, head("POST", path, { host, "content-type": type, ...framing }), chunked ? "1\r\na\r\n" : "a");
      // A byte every 50 ms: never idle, never done.
      ex.trickle(50, chunked ? "1\r\na\r\n" : "a");
      const res = await within(ex.response, BODY_DEADLINE_MS + 3000, "the 408 response");
      const elapsed = Date.now() - started;
      const json = expectOAuthJson(res, 408);
      expect(json.error_description).toMatch(/body/);
      expect(elapsed).toBeGreaterThanOrEqual(BODY_DEADLINE_MS - 20);
      await within(ex.closed, 3000, "the broker to drop the connection");
      expect(unexpectedErrors()).toEqual([]);
    },
  );

  it("a body that arrives within the deadline is read as before", async () => {
    const body = "grant_type=nonsense";
    const ex = rawRequest(t.url, head("POST", "/token", { host, "content-type": FORM, "content-length": String(body.length) }), body.slice(0, 5));
    ex.write(body.slice(5));
    const res = await within(ex.response, 5000, "the response");
    // Read whole and judged: no client_id, so the client is refused.
    expect(res.status).toBe(401);
    expect(JSON.parse(res.body)).toMatchObject({ error: "invalid_client" });
    expect(res.headers.connection).not.toBe("close");
    ex.destroy();
  });
});
