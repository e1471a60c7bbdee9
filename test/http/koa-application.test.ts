// The broker's Koa application (src/http/koa-application.ts): Koa's answers, status and errors
// unchanged, and no on-finished listener on a response the middleware writes itself (an MCP event
// stream, open for hours), which a plain Koa application keeps for as long as it stays open.
import { afterEach, describe, expect, it } from "@jest/globals";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import Koa from "koa";
import { BrokerApplication } from "../../src/http/koa-application.ts";
import { until } from "../support/wait.ts";

const servers: http.Server[] = [];

afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function serve(listener: http.RequestListener): Promise<string> {
  const server = http.createServer(listener);
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function silentApp(kind: "broker" | "koa", use: Koa.Middleware): Koa {
  const app = kind === "broker" ? new BrokerApplication() : new Koa();
  app.silent = true;
  app.use(use);
  return app;
}

interface Listeners {
  readonly socketError: number;
  readonly socketClose: number;
  readonly responseFinish: number;
}

/**
 * Opens an event stream the handler writes itself, and counts the listeners on its response and
 * socket once the first event has arrived (the middleware has returned by then).
 */
async function streamListeners(listener: (onOpen: (res: http.ServerResponse) => void) => http.RequestListener): Promise<Listeners> {
  let open: http.ServerResponse | undefined;
  const url = await serve(listener((res) => (open = res)));
  const response = await fetch(`${url}/mcp`, { headers: { accept: "text/event-stream" } });
  const reader = response.body!.getReader();
  await reader.read();
  await until(() => open !== undefined, "the stream's response");
  const res = open!;
  const counts = {
    socketError: res.socket!.listenerCount("error"),
    socketClose: res.socket!.listenerCount("close"),
    responseFinish: res.listenerCount("finish"),
  };
  await reader.cancel();
  return counts;
}

/** A middleware writing an event stream itself, as the proxy does (ctx.respond = false). */
const writesItself =
  (onOpen: (res: http.ServerResponse) => void): Koa.Middleware =>
  (ctx) => {
    ctx.respond = false;
    ctx.res.writeHead(200, { "content-type": "text/event-stream" });
    ctx.res.write(": open\n\n");
    onOpen(ctx.res);
  };

describe("BrokerApplication", () => {
  it("keeps no listener on an event stream the middleware writes itself; a plain Koa application does", async () => {
    const bare = await streamListeners((onOpen) => (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(": open\n\n");
      onOpen(res);
    });
    const broker = await streamListeners((onOpen) => silentApp("broker", writesItself(onOpen)).callback());
    const koa = await streamListeners((onOpen) => silentApp("koa", writesItself(onOpen)).callback());
    expect(broker).toEqual(bare);
    // The control: Koa's on-finished listens on the socket and the response while the stream is open.
    expect(koa.socketError).toBe(bare.socketError + 1);
    expect(koa.socketClose).toBe(bare.socketClose + 1);
    expect(koa.responseFinish).toBe(bare.responseFinish + 1);
  });

  /** What the middleware answers, by path: every kind of answer Koa's respond() tells apart. */
  const answers: Koa.Middleware = (ctx) => {
    switch (ctx.path) {
      case "/json":
        ctx.status = 201;
        ctx.set("Cache-Control", "no-store");
        ctx.body = { made: true, text: "héllo" };
        return;
      case "/array":
        ctx.body = [1, "two"];
        return;
      case "/bare-object":
        ctx.body = Object.assign(Object.create(null) as object, { a: 1 });
        return;
      case "/dated":
        ctx.body = new Date(0);
        return;
      case "/html":
        ctx.body = "<p>page</p>";
        return;
      case "/text":
        ctx.status = 400;
        ctx.body = "bad";
        return;
      case "/buffer":
        ctx.body = Buffer.from([1, 2, 3]);
        return;
      case "/empty":
        ctx.status = 204;
        return;
      case "/empty-with-body":
        ctx.body = { dropped: true };
        ctx.status = 304;
        return;
      case "/empty-then-body":
        ctx.status = 204;
        ctx.body = { dropped: true };
        return;
      case "/null":
        ctx.body = null;
        return;
      case "/stream":
        ctx.body = Readable.from(["a", "b"]);
        return;
      case "/ended":
        ctx.body = { late: true };
        ctx.res.end("ended by the middleware");
        return;
      case "/throws":
        throw Object.assign(new Error("teapot"), { status: 418, expose: true });
      default:
    }
  };

  /** Status, headers (but the date) and body bytes of one request. */
  async function answerOf(url: string, path: string, method: string) {
    const response = await fetch(`${url}${path}`, { method });
    const headers = Object.fromEntries([...response.headers].filter(([name]) => name !== "date"));
    return { status: response.status, headers, body: Buffer.from(await response.arrayBuffer()).toString("hex") };
  }

  it.each([
    "/json",
    "/array",
    "/bare-object",
    "/dated",
    "/html",
    "/text",
    "/buffer",
    "/empty",
    "/empty-with-body",
    "/empty-then-body",
    "/null",
    "/stream",
    "/ended",
    "/throws",
    "/nothing",
  ])("answers %s as a plain Koa application does, to GET and to HEAD", async (path) => {
    const broker = await serve(silentApp("broker", answers).callback());
    const koa = await serve(silentApp("koa", answers).callback());
    for (const method of ["GET", "HEAD"]) {
      expect(await answerOf(broker, path, method)).toEqual(await answerOf(koa, path, method));
    }
  });

  it("keeps the status the middleware set (Koa's default is 404)", async () => {
    const url = await serve(silentApp("broker", answers).callback());
    expect((await answerOf(url, "/json", "GET")).status).toBe(201);
    expect((await answerOf(url, "/text", "GET")).status).toBe(400);
    expect((await answerOf(url, "/nothing", "GET")).status).toBe(404);
  });

  it("still destroys a body stream whose client went away (Koa's own on-finished, attached by ctx.body)", async () => {
    let body: Readable | undefined;
    const url = await serve(
      silentApp("broker", (ctx) => {
        body = new Readable({ read() {} });
        body.push("first");
        ctx.body = body;
      }).callback(),
    );
    const response = await fetch(url);
    const reader = response.body!.getReader();
    await reader.read();
    await reader.cancel();
    await until(() => body?.destroyed === true, "the body stream destroyed");
  });
});
