// The one place where domain errors (grants/errors.ts) become HTTP: status and headers from the
// OAuth code they carry, the body per route format (OAuth JSON, page, JSON-RPC).
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import Koa from "koa";
import {
  AccessDenied,
  CredentialRejected,
  DomainError,
  InvalidClientMetadata,
  InvalidGrant,
  InvalidRedirectUri,
  InvalidRequest,
  InvalidScope,
  InvalidTarget,
  PageError,
  UnauthorizedClient,
  UnsupportedGrantType,
  UpstreamUnavailable,
} from "../../src/grants/errors.ts";
import { errorHandler, problemOf } from "../../src/http/error-handler.ts";
import { OAuthError, type ErrorFormat } from "../../src/http/errors.ts";
import { requestContext } from "../../src/http/request-context.ts";
import { createLogger } from "../../src/logger.ts";

describe("problemOf", () => {
  it.each([
    [new InvalidRequest("x"), 400, "invalid_request"],
    [new InvalidGrant("x"), 400, "invalid_grant"],
    [new InvalidTarget("x"), 400, "invalid_target"],
    [new InvalidScope("x"), 400, "invalid_scope"],
    [new UnauthorizedClient("x"), 400, "unauthorized_client"],
    [new UnsupportedGrantType("x"), 400, "unsupported_grant_type"],
    [new InvalidClientMetadata("x"), 400, "invalid_client_metadata"],
    [new InvalidRedirectUri("x"), 400, "invalid_redirect_uri"],
    [new AccessDenied("x"), 403, "access_denied"],
    [new CredentialRejected("x"), 401, "invalid_token"],
  ])("%p → %i %s", (err, status, code) => {
    expect(problemOf(err)).toEqual({ status, code, description: "x", headers: {} });
  });

  it("answers an unavailable upstream 503 with Retry-After", () => {
    expect(problemOf(new UpstreamUnavailable("not now", 7))).toEqual({
      status: 503,
      code: "temporarily_unavailable",
      description: "not now",
      headers: { "Retry-After": "7" },
    });
  });

  it("renders sign-in errors for the person: title, detail and hint, status from the code", () => {
    expect(problemOf(new PageError("access_denied", "Other browser", "Opened elsewhere.", "Start again."))).toEqual({
      status: 403,
      code: "access_denied",
      description: "Opened elsewhere.",
      headers: {},
      page: { title: "Other browser", hint: "Start again." },
    });
    expect(problemOf(new PageError("temporarily_unavailable", "Down", "Not reachable."))?.status).toBe(503);
    expect(problemOf(new PageError("temporarily_unavailable", "Down", "Not reachable."))?.headers).toEqual({});
  });

  it("keeps the HTTP layer's own errors as they are, and leaves anything else to the 500 path", () => {
    expect(problemOf(new OAuthError("invalid_client", "who?", { headers: { "WWW-Authenticate": "Basic" } }))).toEqual({
      status: 401,
      code: "invalid_client",
      description: "who?",
      headers: { "WWW-Authenticate": "Basic" },
    });
    expect(problemOf(new PageError("invalid_request", "Gone", "Not here.", undefined, { status: 404 }))).toMatchObject({
      status: 404,
      page: { title: "Gone" },
    });
    // One family: the HTTP layer's error is a domain error too, answered with its own status.
    expect(new OAuthError("invalid_request", "x", { status: 413 })).toBeInstanceOf(DomainError);
    expect(problemOf(new Error("bug"))).toBeUndefined();
    expect(problemOf("not even an error")).toBeUndefined();
  });

  it("names every domain error by its class (for the logs)", () => {
    expect(new InvalidGrant("x").name).toBe("InvalidGrant");
    expect(new UpstreamUnavailable("x").name).toBe("UpstreamUnavailable");
    expect(new CredentialRejected("gone").reason).toBe("gone");
  });
});

describe("errorHandler with domain errors, per route format", () => {
  let server: Server;
  let url: string;
  beforeAll(async () => {
    const app = new Koa();
    app.silent = true;
    app.use(requestContext(createLogger("silent")));
    app.use(errorHandler());
    app.use((ctx) => {
      ctx.state.errorFormat = (ctx.query.format as ErrorFormat | undefined) ?? "oauth";
      if (ctx.path === "/unavailable") throw new UpstreamUnavailable("the upstream identity provider is not reachable right now; retry shortly");
      if (ctx.path === "/grant") throw new InvalidGrant("The refresh token is invalid, expired or revoked.");
      if (ctx.path === "/sign-in") throw new PageError("invalid_request", "Sign-in expired", "This sign-in took too long.", "Start again.");
      throw new Error("unexpected");
    });
    server = createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => new Promise<void>((resolve) => server.close(() => resolve())));

  it("OAuth JSON: status from the code, no-store, Retry-After when temporary", async () => {
    const res = await fetch(`${url}/unavailable`);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("5");
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(await res.json()).toEqual({
      error: "temporarily_unavailable",
      error_description: "the upstream identity provider is not reachable right now; retry shortly",
    });
    const grant = await fetch(`${url}/grant`);
    expect(grant.status).toBe(400);
    expect(grant.headers.get("retry-after")).toBeNull();
    expect(await grant.json()).toEqual({ error: "invalid_grant", error_description: "The refresh token is invalid, expired or revoked." });
  });

  it("JSON-RPC for /mcp", async () => {
    const res = await fetch(`${url}/unavailable?format=jsonrpc`);
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("5");
    expect(await res.json()).toEqual({
      jsonrpc: "2.0",
      error: { code: -32000, message: "the upstream identity provider is not reachable right now; retry shortly" },
      id: null,
    });
  });

  it("a page for the person, even on an OAuth route", async () => {
    const res = await fetch(`${url}/sign-in`);
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toContain("text/html");
    const page = await res.text();
    expect(page).toContain("Sign-in expired");
    expect(page).toContain("This sign-in took too long.");
    expect(page).toContain("Start again.");
  });
});
