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

  it("writes what the middleware set, with its status, as Koa does", async () => {
    const url = await serve(
      silentApp("broker", (ctx) => {
        if (ctx.path === "/json") {
          ctx.status = 201;
          ctx.body = { made: true };
        } else if (ctx.path === "/empty") ctx.status = 204;
        else if (ctx.path === "/stream") ctx.body = Readable.from(["a", "b"]);
        else if (ctx.path === "/throws") throw Object.assign(new Error("teapot"), { status: 418, expose: true });
      }).callback(),
    );
    const json = await fetch(`${url}/json`);
    expect(json.status).toBe(201);
    expect(await json.json()).toEqual({ made: true });
    const empty = await fetch(`${url}/empty`);
    expect(empty.status).toBe(204);
    expect(await empty.text()).toBe("");
    expect(await (await fetch(`${url}/stream`)).text()).toBe("ab");
    const nothing = await fetch(`${url}/nothing`);
    expect(nothing.status).toBe(404);
    expect(await nothing.text()).toBe("Not Found");
    const head = await fetch(`${url}/json`, { method: "HEAD" });
    expect(head.status).toBe(201);
    expect(head.headers.get("content-length")).toBe(String(JSON.stringify({ made: true }).length));
    const thrown = await fetch(`${url}/throws`);
    expect(thrown.status).toBe(418);
    expect(await thrown.text()).toBe("teapot");
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
