// The form and JSON readers take a body that has already arrived whole in one read, and read one
// still arriving as a stream: the same parameters either way, a character split between packets
// included, and the connection goes on serving the next request.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Koa from "koa";
import { Pool } from "undici";
import { readForm, readJsonObject } from "../../src/http/body.ts";
import { errorHandler } from "../../src/http/error-handler.ts";
import { requestContext } from "../../src/http/request-context.ts";
import { createLogger } from "../../src/logger.ts";
import { rawRequest } from "./raw-http.ts";

describe("a request body, arrived whole or still arriving", () => {
  let server: Server;
  let origin: string;
  /** Resolved when the next request's handler starts, before it reads the body. */
  let handlerStarted: () => void = () => undefined;
  const started = () => new Promise<void>((resolve) => (handlerStarted = resolve));

  beforeAll(async () => {
    const app = new Koa();
    app.silent = true;
    app.use(requestContext(createLogger("silent")));
    app.use(errorHandler());
    app.use(async (ctx) => {
      handlerStarted();
      ctx.body = ctx.path === "/json" ? await readJsonObject(ctx) : await readForm(ctx);
    });
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const form = Buffer.from("grant_type=refresh_token&refresh_token=abc&scope=caf%C3%A9&note=s\u00e9r\u00e9nit\u00e9", "utf8");
  const expected = { grant_type: "refresh_token", refresh_token: "abc", scope: "café", note: "sérénité" };
  const head = (path: string, type: string, length: number) => `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${type}\r\nContent-Length: ${length}`;

  it("reads a form sent with its headers", async () => {
    const x = rawRequest(origin, head("/form", "application/x-www-form-urlencoded", form.length), form);
    expect(JSON.parse((await x.response).body)).toEqual(expected);
    x.destroy();
  });

  it("reads the same form when its body comes after the handler started, split inside a character", async () => {
    const x = rawRequest(origin, head("/form", "application/x-www-form-urlencoded", form.length));
    await started();
    // "é" is two bytes: the cut falls between them.
    const cut = form.indexOf(Buffer.from("\u00e9", "utf8")) + 1;
    x.write(form.subarray(0, cut));
    x.write(form.subarray(cut));
    const response = await x.response;
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toEqual(expected);
    x.destroy();
  });

  it("reads a JSON body either way, and a kept-alive connection serves the requests after a body read whole", async () => {
    const json = Buffer.from(JSON.stringify({ a: "\u00fcber", n: 1 }), "utf8");
    const x = rawRequest(origin, head("/json", "application/json", json.length), json);
    expect(JSON.parse((await x.response).body)).toEqual({ a: "über", n: 1 });
    x.destroy();

    const y = rawRequest(origin, head("/json", "application/json", json.length));
    await started();
    y.write(json);
    expect(JSON.parse((await y.response).body)).toEqual({ a: "über", n: 1 });
    y.destroy();

    // Requests one after the other on one kept-alive connection: a body taken in one read leaves
    // the connection ready for the next request.
    const pool = new Pool(origin, { connections: 1 });
    try {
      for (let i = 0; i < 3; i++) {
        const res = await pool.request({ method: "POST", path: "/form", headers: { "content-type": "application/x-www-form-urlencoded" }, body: form });
        expect(await res.body.json()).toEqual(expected);
      }
      expect(pool.stats.connected).toBe(1);
    } finally {
      await pool.close();
    }
  });
});
