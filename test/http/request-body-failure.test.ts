// Which failures are the client's stream and which are the broker's: decided by where the error
// came from, never by its code. A database socket reset after the body was read carries the same
// ECONNRESET as a client hanging up mid-body; it must be answered 503 with Retry-After (clients
// retry), never 400 (MCP SDK clients read a 400 at /token as "drop the tokens").
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type Server } from "node:http";
import net, { type AddressInfo } from "node:net";
import Koa from "koa";
import pg from "pg";
import { errorHandler } from "../../src/http/error-handler.ts";
import { readForm, RequestBodyUnreadable } from "../../src/http/body.ts";
import { requestContext } from "../../src/http/request-context.ts";
import { createLogger } from "../../src/logger.ts";

/** A "database server" that resets every connection it accepts: pg's error is a genuine ECONNRESET. */
async function resettingServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = net.createServer((socket) => socket.once("data", () => socket.resetAndDestroy()));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `postgresql://broker@127.0.0.1:${port}/broker`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

/** A query the way the hot store sends one: pg's own error, unwrapped. */
async function queryError(url: string): Promise<unknown> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  try {
    await client.connect();
    await client.query("SELECT 1");
    return undefined;
  } catch (err) {
    return err;
  } finally {
    await client.end().catch(() => undefined);
  }
}

describe("a database socket reset after the request body was read", () => {
  let database: Awaited<ReturnType<typeof resettingServer>>;
  let server: Server;
  let url: string;
  beforeAll(async () => {
    database = await resettingServer();
    const app = new Koa();
    app.silent = true;
    app.use(requestContext(createLogger("silent")));
    app.use(errorHandler());
    app.use(async (ctx) => {
      await readForm(ctx);
      // The body is whole: Node has marked the request destroyed, as after every read body.
      throw await queryError(database.url);
    });
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await database.close();
  });

  it("is a real ECONNRESET from the pg driver", async () => {
    expect(await queryError(database.url)).toMatchObject({ code: "ECONNRESET" });
  });

  it("is answered 503 with Retry-After, not 400", async () => {
    const res = await fetch(`${url}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: "x", client_id: "c" }),
    });
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("5");
    expect(await res.json()).toMatchObject({ error: "temporarily_unavailable" });
  });
});

describe("RequestBodyUnreadable", () => {
  it("is made only by the body readers, and keeps the stream's code for the log", () => {
    const reset = Object.assign(new Error("aborted"), { code: "ECONNRESET" });
    const err = new RequestBodyUnreadable(reset);
    expect(err).toMatchObject({ status: 400, code: "invalid_request", streamCode: "ECONNRESET", cause: reset });
    expect(new RequestBodyUnreadable(new Error("aborted")).streamCode).toBe("aborted");
  });
});
