import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { Writable } from "node:stream";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { createLogger, redactUrl } from "../../src/logger.ts";
import { listen } from "../../src/http/server.ts";
import { runToEnd, startServer, waitForOutput } from "../support/spawn.ts";
import { createPostgresDatabase, postgresAvailable } from "../support/pg-database.ts";
import { until } from "../support/wait.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { INITIALIZE_MESSAGE, mcpPostTo } from "../support/mcp-probe.ts";

describe("application skeleton", () => {
  let t: TestBroker;
  beforeAll(async () => {
    t = await startBroker();
  });
  afterAll(async () => t.stop());

  it("answers /healthz and /readyz", async () => {
    const health = await fetch(`${t.url}/healthz`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    const ready = await fetch(`${t.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "ready" });
  });

  it("sets the security headers and the API's CSP on an MCP answer relayed from the MCP server too", async () => {
    const { tokens } = await obtainTokens(t.url, { user: "alice" });
    const res = await mcpPostTo(`${t.url}/mcp`, tokens.access_token, INITIALIZE_MESSAGE);
    expect(res.status).toBe(200);
    expect(res.headers.get("mcp-session-id")).toBeTruthy();
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("content-security-policy")).toBe("default-src 'none'; frame-ancestors 'none'");
    expect(res.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("sets security headers and a request id on every response", async () => {
    const res = await fetch(`${t.url}/healthz`, { headers: { "x-request-id": "trace-abc-12345" } });
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    expect(res.headers.get("x-request-id")).toBe("trace-abc-12345");
    const unsafe = await fetch(`${t.url}/healthz`, { headers: { "x-request-id": "<script>" } });
    expect(unsafe.headers.get("x-request-id")).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("answers unknown paths with a JSON 404, never a stack trace", async () => {
    const res = await fetch(`${t.url}/no/such/thing`);
    expect(res.status).toBe(404);
    const body = (await res.json()) as Record<string, string>;
    expect(body.error).toBe("not_found");
    expect(JSON.stringify(body)).not.toMatch(/at .*\.ts/);
  });
});

describe("logging", () => {
  it("logs a line per request at info (an access line for /mcp), but the probes only at debug", async () => {
    const lines: Array<{ level: number; url?: string; msg: string; method?: string; status?: number }> = [];
    const logger = createLogger(
      "info",
      new Writable({
        write: (c: Buffer, _e, done) => {
          lines.push(JSON.parse(c.toString()));
          done();
        },
      }),
    );
    const { createApp } = await import("../../src/app.ts");
    const Router = (await import("@koa/router")).default;
    const mcp = new Router().all(["/mcp", "/mcp/{*rest}"], (ctx) => {
      ctx.body = "ok";
    });
    const t = await startBroker();
    const app = createApp({ config: t.broker.config, logger, routers: [mcp] });
    const server = await listen(app.callback(), 0, "127.0.0.1");
    try {
      for (const p of ["/mcp", "/mcp/sub", "/healthz", "/mcpx", "/.well-known/oauth-protected-resource/mcp"])
        await fetch(`http://127.0.0.1:${server.port}${p}`);
      // A request is logged when its response finishes, which may be after the client has it.
      await until(() => lines.filter((l) => l.msg === "request" || l.msg === "mcp").length >= 4, "four request lines");
      expect(lines.filter((l) => l.msg === "request").map((l) => l.url)).toEqual(["/mcpx", "/.well-known/oauth-protected-resource/mcp"]);
      expect(lines.filter((l) => l.msg === "mcp").map((l) => [l.level, l.method, l.status])).toEqual([
        [30, "GET", 200],
        [30, "GET", 200],
      ]);
    } finally {
      await server.close(1000);
      await t.stop();
    }
  });

  it("never writes tokens, codes, cookies or secrets", async () => {
    let output = "";
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        output += chunk.toString();
        done();
      },
    });
    const logger = createLogger("trace", sink);
    const t = await startBroker();
    // Re-point the broker's request logging at our sink by starting a second app on the same DB.
    const { createApp } = await import("../../src/app.ts");
    const { healthRouter } = await import("../../src/http/health.ts");
    const app = createApp({ config: t.broker.config, logger, routers: [healthRouter(t.broker.database)] });
    const server = await listen(app.callback(), 0, "127.0.0.1");
    try {
      const secret = "mab_at_SUPERSECRETTOKENVALUE1234567890";
      await fetch(`http://127.0.0.1:${server.port}/healthz?code=CODESECRET123&access_token=${secret}&state=STATESECRET&scope=visible`, {
        headers: { authorization: `Bearer ${secret}`, cookie: "mab_session=COOKIESECRET" },
      });
      await fetch(`http://127.0.0.1:${server.port}/token?client_secret=CLIENTSECRET9`, { method: "POST" });
      logger.info(
        { headers: { authorization: `Bearer ${secret}`, cookie: "COOKIESECRET" }, body: { refresh_token: "RTSECRET", client_secret: "CLIENTSECRET9" } },
        "explicit",
      );
      // Look only once the request line is there, or "no secret" would pass without looking.
      await until(() => output.includes("/token?"), "the /token request line");
      // An allow-listed, harmless parameter stays readable; every other value is hidden.
      expect(output).toContain("scope=visible");
      expect(output).toContain("[redacted]");
      for (const s of [secret, "CODESECRET123", "STATESECRET", "COOKIESECRET", "CLIENTSECRET9", "RTSECRET"]) expect(output).not.toContain(s);
    } finally {
      await server.close(1000);
      await t.stop();
    }
  });

  it("redacts sensitive query parameters", () => {
    expect(redactUrl("/cb?code=abc&state=xyz&x=1&scope=mcp")).toBe("/cb?code=[redacted]&state=[redacted]&x=[redacted]&scope=mcp");
    expect(redactUrl("/plain")).toBe("/plain");
  });
});

describe("graceful shutdown", () => {
  it("finishes an in-flight request, then stops accepting", async () => {
    let received!: () => void;
    const arrived = new Promise<void>((resolve) => (received = resolve));
    let answer: (() => void) | undefined;
    const server = await listen(
      (_req, res) => {
        answer = () => res.end("finished");
        received();
      },
      0,
      "127.0.0.1",
    );
    const url = `http://127.0.0.1:${server.port}/`;
    const inflight = fetch(url).then(async (r) => ({ status: r.status, body: await r.text() }));
    await arrived;
    const closing = server.close(5000);
    answer!();
    await expect(inflight).resolves.toEqual({ status: 200, body: "finished" });
    await expect(closing).resolves.toEqual({ forced: false });
    await expect(fetch(url)).rejects.toThrow();
  });

  it("cuts requests that outlive the deadline", async () => {
    let received!: () => void;
    const arrived = new Promise<void>((resolve) => (received = resolve));
    const server = await listen(
      () => {
        received(); // and never answers
      },
      0,
      "127.0.0.1",
    );
    const inflight = fetch(`http://127.0.0.1:${server.port}/`).catch((e: Error) => e);
    await arrived;
    await expect(server.close(300)).resolves.toEqual({ forced: true });
    // fetch fails (TypeError from another realm under Jest ESM, so compare by name).
    expect(await inflight).toMatchObject({ name: "TypeError" });
  });

  it("the real process migrates, serves /healthz, and exits 0 on SIGTERM", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "mab-proc-"));
    const child = startServer({ cwd: dir, env: { PORT: "0", LOG_LEVEL: "warn" } });
    const finished = runToEnd(child, 30_000);
    const out = await waitForOutput(child, /Health: +(\S+)/);
    expect(existsSync(path.join(dir, "data/broker.db"))).toBe(true);
    expect(existsSync(path.join(dir, "data/secret.key"))).toBe(true);
    const port = /listening on 127\.0\.0\.1:(\d+)/.exec(out)?.[1];
    expect(port).toBeDefined();
    const res = await fetch(`http://127.0.0.1:${port}/healthz`);
    expect(res.status).toBe(200);
    child.kill("SIGTERM");
    const result = await finished;
    expect(result.code).toBe(0);
  });
});

(postgresAvailable ? describe : describe.skip)("readiness on PostgreSQL", () => {
  it("reports 503 when the database goes away, without a stack trace", async () => {
    const database = await createPostgresDatabase();
    const t = await startBroker({ DATABASE_URL: database.url });
    try {
      expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
      await database.goDown();
      const res = await fetch(`${t.url}/readyz`);
      expect(res.status).toBe(503);
      expect(await res.json()).toEqual({ status: "not ready", database: "unreachable" });
    } finally {
      await t.stop().catch(() => undefined);
      await database.drop();
    }
  });
});
