// The HTTP server's own deadlines (src/http/server.ts): headers must arrive within a short time,
// the whole request within a longer one (a backstop behind the body deadlines), responses (SSE)
// never time out, and a response given before its request's body has arrived closes the connection
// unless the rest follows at once. Raw sockets, byte timing controlled by the test.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { listen } from "../../src/http/server.ts";
import { head, rawRequest } from "./raw-http.ts";
import { within } from "../support/wait.ts";

const GRACE_MS = 200;
const REQUEST_TIMEOUT_MS = 1000;

/** The test server, with the deadlines above and the given request deadline. */
function start(requestTimeoutMs: number) {
  return listen(
    (req, res) => {
      if (req.url === "/stream") {
        // A long-lived response (as an SSE stream): well past the request deadline.
        res.writeHead(200, { "content-type": "text/event-stream" });
        let n = 0;
        const timer = setInterval(() => {
          res.write(`data: ${n}\n\n`);
          if (++n === 15) {
            clearInterval(timer);
            res.end();
          }
        }, 100);
        return;
      }
      if (req.url === "/answer-at-once") {
        // Answers without reading the body, as a 401 or 404 does.
        res.writeHead(401).end("no");
        return;
      }
      req.resume();
      req.on("end", () => res.end("ok"));
    },
    0,
    "127.0.0.1",
    { headersTimeoutMs: 300, requestTimeoutMs, checkIntervalMs: 50, unreadBodyGraceMs: GRACE_MS },
  );
}

describe("the HTTP server's own deadlines", () => {
  let server: Awaited<ReturnType<typeof listen>>;
  let origin: string;
  beforeAll(async () => {
    server = await start(REQUEST_TIMEOUT_MS);
    origin = `http://127.0.0.1:${server.port}`;
  });
  afterAll(async () => {
    await server.close(1000);
  });

  it("closes a connection whose headers trickle in past the headers deadline", async () => {
    const started = Date.now();
    const ex = rawRequest(origin, { raw: "GET / HTTP/1.1\r\nhost: x\r\nx-slow: a" });
    ex.trickle(30); // the header line never ends
    await within(ex.closed, 3000, "the connection to be closed");
    expect(Date.now() - started).toBeGreaterThanOrEqual(300 - 20);
  });

  it("cuts a request whose body is still arriving at the request deadline, with 408", async () => {
    const started = Date.now();
    const ex = rawRequest(origin, head("POST", "/", { host: "x", "content-length": "1000" }), "a");
    ex.trickle(30);
    const res = await within(ex.response, REQUEST_TIMEOUT_MS + 3000, "the 408");
    expect(res.status).toBe(408);
    expect(Date.now() - started).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 20);
    await within(ex.closed, 3000, "the connection to close");
  });

  it("closes the connection after answering a request whose body keeps trickling", async () => {
    // A request deadline no test outlives: only the grace after the answer can close this one.
    const graceOnly = await start(10 * 60_000);
    try {
      const ex = rawRequest(`http://127.0.0.1:${graceOnly.port}`, head("POST", "/answer-at-once", { host: "x", "content-length": "100000" }), "{");
      ex.trickle(30);
      const res = await within(ex.response, 3000, "the answer");
      expect(res.status).toBe(401);
      const answered = Date.now();
      await within(ex.closed, 10_000, "the connection to be closed instead of reading the rest");
      expect(Date.now() - answered).toBeGreaterThanOrEqual(GRACE_MS - 20);
    } finally {
      await graceOnly.close(1000);
    }
  });

  it("keeps the connection when the rest of an answered body follows at once", async () => {
    const ex = rawRequest(origin, head("POST", "/answer-at-once", { host: "x", "content-length": "2" }), "{");
    const first = await within(ex.response, 3000, "the answer");
    expect(first.status).toBe(401);
    ex.write("}");
    // The same connection carries the next request, after the grace has passed.
    const replies: string[] = [];
    ex.socket.on("data", (d: Buffer) => replies.push(d.toString("latin1")));
    const timer = setTimeout(() => ex.write("GET /later HTTP/1.1\r\nhost: x\r\n\r\n"), GRACE_MS * 2);
    await within(
      new Promise<void>((resolve) => ex.socket.on("data", () => replies.join("").includes("ok") && resolve())),
      3000,
      "the second answer on the same connection",
    );
    clearTimeout(timer);
    expect(replies.join("")).toMatch(/^HTTP\/1\.1 200/);
    ex.destroy();
  });

  it("never cuts a long response: the request deadline covers receiving the request only", async () => {
    const res = await fetch(`${origin}/stream`);
    const text = await res.text();
    expect(text.match(/data:/g)).toHaveLength(15);
  });

  it("defaults: headers within 15 s, the whole request within 5 minutes, responses unbounded", async () => {
    const plain = await listen((_req, res) => res.end(), 0, "127.0.0.1");
    try {
      expect(plain.server.headersTimeout).toBe(15_000);
      expect(plain.server.requestTimeout).toBe(300_000);
    } finally {
      await plain.close(1000);
    }
  });
});
