// DirectRelay (src/gateway/direct-relay.ts): an MCP server's answer written to the client's
// response from undici's dispatch callbacks, over real HTTP on both sides: a server standing for
// the MCP server, a broker-side server relaying to it through an undici Pool, a client.
import { afterEach, describe, expect, it } from "@jest/globals";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { DirectRelay } from "../../src/gateway/direct-relay.ts";
import { ExchangeAbort } from "../../src/gateway/exchange-abort.ts";
import { until } from "../support/wait.ts";

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function listen(handler: http.RequestListener): Promise<string> {
  const server = http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closers.push(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

interface Relayed {
  readonly url: string;
  /** Each relay's outcome, in order: "ok", or the error's message and whether the head was written. */
  readonly outcomes: string[];
  readonly relays: DirectRelay[];
  readonly cuts: ExchangeAbort[];
}

/** A relaying server in front of `upstream`; `refuse` turns a status into the broker's refusal. */
async function relaying(upstream: string, refuse?: (status: number) => Error | undefined): Promise<Relayed> {
  const pool = new Pool(upstream);
  closers.push(() => pool.destroy());
  const outcomes: string[] = [];
  const relays: DirectRelay[] = [];
  const cuts: ExchangeAbort[] = [];
  const url = await listen((req, res) => {
    const cut = new ExchangeAbort();
    cuts.push(cut);
    const relay = new DirectRelay(
      res,
      cut,
      (status, headers) => {
        const refused = refuse?.(status);
        if (refused) return refused;
        res.writeHead(status, { "content-type": String(headers["content-type"]) });
        return undefined;
      },
      (err, headWritten) => {
        outcomes.push(err ? `${err.message} (head written: ${headWritten})` : "ok");
        if (err && !headWritten) res.writeHead(502).end("refused");
      },
    );
    relays.push(relay);
    pool.dispatch({ method: "POST", path: "/mcp", headers: { "content-type": "application/json" }, body: req }, relay);
  });
  return { url, outcomes, relays, cuts };
}

describe("DirectRelay", () => {
  it("relays status, headers and body, and says when the answer was relayed whole", async () => {
    const upstream = await listen((req, res) => {
      req.resume();
      req.on("end", () => res.writeHead(200, { "content-type": "application/json" }).end('{"jsonrpc":"2.0","id":1,"result":{}}'));
    });
    const { url, outcomes } = await relaying(upstream);
    const answer = await fetch(url, { method: "POST", body: '{"jsonrpc":"2.0","id":1,"method":"tools/call"}' });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("application/json");
    expect(await answer.text()).toBe('{"jsonrpc":"2.0","id":1,"result":{}}');
    await until(() => outcomes.length === 1, "the relay's outcome");
    expect(outcomes).toEqual(["ok"]);
  });

  it("sends the head at once when no body came with it (a long tool call), and the body when it comes", async () => {
    let finish: (() => void) | undefined;
    const upstream = await listen((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
      finish = () => res.end('event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{}}\n\n');
    });
    const { url } = await relaying(upstream);
    // Without the flush the client would see nothing until the body: this awaits the head alone.
    const answer = await fetch(url, { method: "POST", body: "{}" });
    expect(answer.status).toBe(200);
    expect(answer.headers.get("content-type")).toBe("text/event-stream");
    finish!();
    expect(await answer.text()).toContain('"result":{}');
  });

  it("cuts the request to the MCP server when the broker refuses its answer, and writes nothing of it", async () => {
    let upstreamClosed = false;
    const upstream = await listen((req, res) => {
      req.resume();
      res.on("close", () => {
        upstreamClosed = true;
      });
      res.writeHead(401, { "content-type": "application/json" });
      res.write('{"error":"the MCP server\'s own"');
    });
    const { url, outcomes } = await relaying(upstream, (status) => (status === 401 ? new Error("the broker's challenge") : undefined));
    const answer = await fetch(url, { method: "POST", body: "{}" });
    expect(answer.status).toBe(502);
    expect(await answer.text()).toBe("refused");
    expect(outcomes).toEqual(["the broker's challenge (head written: false)"]);
    await until(() => upstreamClosed, "the MCP server to see its answer cut");
  });

  it("destroy() (a shutdown ending the stream) and the exchange's cut both end the request to the MCP server", async () => {
    const closed: string[] = [];
    const upstream = await listen((req, res) => {
      req.resume();
      res.on("close", () => closed.push(String(req.headers["x-which"] ?? "?")));
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.flushHeaders();
    });
    const { url, outcomes, relays, cuts } = await relaying(upstream);
    const first = await fetch(url, { method: "POST", body: "{}" });
    expect(first.status).toBe(200);
    relays[0]!.destroy();
    await until(() => closed.length === 1, "the MCP server to see the first request cut");
    await until(() => outcomes.length === 1, "the first relay's outcome");
    expect(outcomes[0]).toMatch(/head written: true/);
    await expect(first.text()).rejects.toThrow();

    const second = await fetch(url, { method: "POST", body: "{}" });
    expect(second.status).toBe(200);
    cuts[1]!.abort(new Error("the client went away"));
    await until(() => closed.length === 2, "the MCP server to see the second request cut");
    await until(() => outcomes.length === 2, "the second relay's outcome");
    expect(outcomes[1]).toBe("the client went away (head written: true)");
  });

  it("holds the MCP server back while the client does not read (onData says pause), and resumes it on drain", async () => {
    // The relay's side of undici's contract (Dispatcher.dispatch: onData returning false pauses the
    // response until the resume given to onHeaders is called), on a real response whose client
    // does not read: without it a slow client would make the broker buffer the whole answer.
    let relay: DirectRelay | undefined;
    let resumed = 0;
    const url = await listen((req, res) => {
      req.resume();
      relay = new DirectRelay(
        res,
        new ExchangeAbort(),
        (status) => {
          res.writeHead(status, { "content-type": "application/octet-stream" });
          return undefined;
        },
        () => {},
      );
      relay.onHeaders(200, [], () => {
        resumed++;
      });
    });
    const answer = await new Promise<http.IncomingMessage>((resolve) => http.get(url, resolve));
    answer.pause();
    await until(() => relay !== undefined, "the relay to start");
    const chunk = Buffer.alloc(64 * 1024, 120);
    let sent = 0;
    while (relay!.onData(chunk)) {
      sent += chunk.length;
      if (sent > 256 * 1024 * 1024) throw new Error("the relay never asked to pause");
    }
    expect(resumed).toBe(0);
    let received = 0;
    answer.on("data", (data: Buffer) => {
      received += data.length;
    });
    answer.resume();
    await until(() => resumed === 1, "the relay to resume the MCP server's side on drain");
    relay!.onComplete();
    await new Promise((resolve) => answer.on("end", resolve));
    expect(received).toBe(sent + chunk.length);
  });

  it("an exchange cut before the MCP server was reached never sends the request", async () => {
    let reached = 0;
    const upstream = await listen((req, res) => {
      reached++;
      req.resume();
      res.end();
    });
    const pool = new Pool(upstream);
    closers.push(() => pool.destroy());
    const cut = new ExchangeAbort();
    cut.abort(new Error("deadline"));
    const outcome = await new Promise<string>((resolve) => {
      const res = new http.ServerResponse(new http.IncomingMessage(null as never));
      const relay = new DirectRelay(
        res,
        cut,
        () => undefined,
        (err) => resolve(err?.message ?? "ok"),
      );
      pool.dispatch({ method: "POST", path: "/mcp", body: "{}" }, relay);
    });
    expect(outcome).toBe("deadline");
    expect(reached).toBe(0);
  });
});
