// Endpoints found by exact method and path (src/http/exact-routes.ts): the token endpoint's POST is
// answered before the browser session and the routers, with everything the broker's own middleware
// gives every answer, while whatever the table does not take is answered by the routers as before.
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import http from "node:http";
import type { AddressInfo } from "node:net";
import Router from "@koa/router";
import type Koa from "koa";
import { BrokerApplication } from "../../src/http/koa-application.ts";
import { exactRoutes } from "../../src/http/exact-routes.ts";
import { startBroker, startBrokerUnderPath, type TestBroker } from "../support/start-broker.ts";
import { postForm, send } from "../support/oauth-client.ts";

describe("exactRoutes", () => {
  const servers: http.Server[] = [];
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  /**
   * An application with the table in front of a middleware that marks what passes it (where the
   * broker has its browser session) and a router holding the same route, as the broker has them.
   */
  async function serve(): Promise<{ url: string; routes: string[] }> {
    const routes: string[] = [];
    const handle: Koa.Middleware = (ctx) => {
      routes.push(String(ctx.state.route ?? (ctx as { _matchedRoute?: unknown })._matchedRoute));
      ctx.body = { answered: true };
    };
    const router = new Router();
    router.post("/token", handle);
    const app = new BrokerApplication();
    app.silent = true;
    app.use(exactRoutes([{ method: "POST", paths: ["/token", "/broker/token"], handle }]));
    app.use((ctx, next) => {
      ctx.set("X-Walked", "yes");
      return next();
    });
    app.use(router.routes());
    app.use(router.allowedMethods());
    const server = http.createServer(app.callback());
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, routes };
  }

  it("answers its method and paths itself, without passing the request on", async () => {
    const { url, routes } = await serve();
    for (const path of ["/token", "/broker/token", "/token?trace=1"]) {
      const res = await send(`${url}${path}`, { method: "POST" });
      expect(res.status).toBe(200);
      expect(res.json).toEqual({ answered: true });
      expect(res.headers.get("x-walked")).toBeNull();
    }
    // The request span's route is the pattern, as a router leaves it.
    expect(routes).toEqual(["/token", "/broker/token", "/token"]);
  });

  it("passes every other request on: the routers answer them as before", async () => {
    const { url, routes } = await serve();
    // Another method: the router's 405, with what it allows.
    const get = await send(`${url}/token`);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toContain("POST");
    expect(get.headers.get("x-walked")).toBe("yes");
    // A trailing slash or other letter case: not in the table; the router matches them, as it did.
    for (const path of ["/token/", "/TOKEN"]) {
      const res = await send(`${url}${path}`, { method: "POST" });
      expect(res.status).toBe(200);
      expect(res.headers.get("x-walked")).toBe("yes");
    }
    expect(routes).toEqual(["/token", "/token"]);
    const other = await send(`${url}/other`, { method: "POST" });
    expect(other.status).toBe(404);
  });

  it("refuses a table with two routes for one method and path", () => {
    const handle: Koa.Middleware = () => undefined;
    expect(() =>
      exactRoutes([
        { method: "POST", paths: ["/token"], handle },
        { method: "POST", paths: ["/token"], handle },
      ]),
    ).toThrow("two exact routes for POST /token");
  });
});

const METRICS_TOKEN = "metrics-token-for-exact-routes";

describe("the broker's token endpoint, found by exact path", () => {
  let t: TestBroker;
  let under: Awaited<ReturnType<typeof startBrokerUnderPath>>;
  beforeAll(async () => {
    [t, under] = await Promise.all([startBroker({ METRICS_TOKEN }), startBrokerUnderPath()]);
  });
  afterAll(async () => Promise.all([t.stop(), under.broker.stop()]));

  it("answers with every header the broker's middleware gives an answer, and CORS for browser clients", async () => {
    const origin = "http://inspector.example";
    const res = await postForm(`${t.url}/token`, { grant_type: "refresh_token", refresh_token: "mab_rt_unknown", client_id: "nobody" }, { origin });
    // Unknown client: the error handler's OAuth answer (RFC 6749 §5.2).
    expect(res.status).toBe(401);
    expect(res.json).toMatchObject({ error: "invalid_client" });
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; frame-ancestors 'none'");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    // No browser session: the token endpoint never starts one.
    expect(res.headers.get("set-cookie")).toBeNull();
  });

  it("is counted in the metrics as every token request is", async () => {
    const before = await tokenRequests(t);
    await postForm(`${t.url}/token`, { grant_type: "authorization_code", code: "mab_ac_unknown", client_id: "nobody" });
    expect(await tokenRequests(t)).toBe(before + 1);
  });

  it("is found at both paths under a PUBLIC_URL with a path, and other methods still get 405", async () => {
    for (const url of [`${under.origin}/token`, `${under.issuer}/token`]) {
      const res = await postForm(url, { grant_type: "client_credentials", client_id: "nobody" });
      expect(res.status).toBe(401);
      expect(res.json).toMatchObject({ error: "invalid_client" });
      const get = await send(url);
      expect(get.status).toBe(405);
      expect(get.headers.get("allow")).toContain("POST");
    }
  });
});

/** mab_http_requests_total for the token route, all statuses, scraped from /metrics. */
async function tokenRequests(t: TestBroker): Promise<number> {
  const res = await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const text = await res.text();
  return text
    .split("\n")
    .filter((line) => line.startsWith("mab_http_requests_total{") && line.includes('route="token"'))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}
