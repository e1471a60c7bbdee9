// Discovery (RFC 8414, RFC 9728), the 2025-03-26 default paths, CORS, and a
// PUBLIC_URL with a path.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { createLogger, type Logger } from "../../src/logger.ts";
import { startBroker, startBrokerUnderPath, type TestBroker } from "../support/start-broker.ts";
import { authorizeUrl, postForm, postJson, registerTestClient, send } from "../support/oauth-client.ts";

let t: TestBroker;
let closed: TestBroker;
beforeAll(async () => {
  [t, closed] = await Promise.all([startBroker({ TRUST_PROXY: "true" }), startBroker({ DYNAMIC_REGISTRATION: "false", RESOURCE_NAME: "Acme Docs" })]);
});
afterAll(async () => Promise.all([t.stop(), closed.stop()]));

describe("RFC 8414 authorization server metadata", () => {
  it("describes every endpoint and capability", async () => {
    const res = await send(`${t.url}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/json/);
    expect(res.json).toMatchObject({
      issuer: t.url,
      authorization_endpoint: `${t.url}/authorize`,
      token_endpoint: `${t.url}/token`,
      registration_endpoint: `${t.url}/register`,
      revocation_endpoint: `${t.url}/revoke`,
      introspection_endpoint: `${t.url}/introspect`,
      response_types_supported: ["code"],
      code_challenge_methods_supported: ["S256"],
      scopes_supported: ["mcp", "offline_access"],
      authorization_response_iss_parameter_supported: true,
    });
    expect(res.json!.grant_types_supported).toEqual(expect.arrayContaining(["authorization_code", "refresh_token", "client_credentials"]));
    expect([...(res.json!.token_endpoint_auth_methods_supported as string[])].sort()).toEqual([
      "client_secret_basic",
      "client_secret_post",
      "none",
      "private_key_jwt",
    ]);
    expect(res.json!.token_endpoint_auth_signing_alg_values_supported).toEqual(expect.arrayContaining(["RS256", "ES256"]));
  });

  it("leaves out the registration endpoint when dynamic registration is off", async () => {
    const res = await send(`${closed.url}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    expect(res.json).not.toHaveProperty("registration_endpoint");
    expect(res.json!.token_endpoint).toBe(`${closed.url}/token`);
  });

  it("is not served under unknown well-known paths", async () => {
    const res = await send(`${t.url}/.well-known/oauth-authorization-server/other`);
    expect(res.status).toBe(404);
  });
});

describe("RFC 9728 protected resource metadata", () => {
  it.each(["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])("is served at %s", async (path) => {
    const res = await send(`${t.url}${path}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      resource: `${t.url}/mcp`,
      authorization_servers: [t.url],
      bearer_methods_supported: ["header"],
    });
    expect(res.json!.scopes_supported).toContain("mcp");
  });

  it("names the resource: RESOURCE_NAME, by default the host of PUBLIC_URL", async () => {
    const byDefault = await send(`${t.url}/.well-known/oauth-protected-resource/mcp`);
    expect(byDefault.json!.resource_name).toBe(new URL(t.url).host);
    const named = await send(`${closed.url}/.well-known/oauth-protected-resource/mcp`);
    expect(named.json!.resource_name).toBe("Acme Docs");
  });

  it("matches the resource_metadata URL of the /mcp challenge", async () => {
    const challenge = await send(`${t.url}/mcp`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    expect(challenge.status).toBe(401);
    const url = /resource_metadata="([^"]+)"/.exec(challenge.headers.get("www-authenticate") ?? "")?.[1];
    expect(url).toBe(`${t.url}/.well-known/oauth-protected-resource/mcp`);
    expect((await send(url!)).json!.resource).toBe(`${t.url}/mcp`);
  });
});

describe("protocol version headers on discovery", () => {
  let lines: Record<string, unknown>[];
  let restore: () => void;
  beforeAll(() => {
    // Every request logs through a child of the broker's logger: capture those children.
    lines = [];
    const capture = createLogger("info", { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const logger = t.broker.logger as Logger & { child: Logger["child"] };
    const original = logger.child;
    logger.child = ((bindings: Record<string, unknown>) => capture.child(bindings)) as Logger["child"];
    restore = () => {
      logger.child = original;
    };
  });
  afterAll(() => restore());

  it.each([
    ["MCP-Protocol-Version", "2025-06-18", "/.well-known/oauth-protected-resource/mcp"],
    ["Context-Protocol-Version", "2025-03-26", "/.well-known/oauth-authorization-server"],
  ])("answers a request carrying %s normally and logs the version", async (header, version, path) => {
    const plain = await send(`${t.url}${path}`);
    const res = await send(`${t.url}${path}`, { headers: { [header]: version } });
    expect(res.status).toBe(200);
    expect(res.json).toEqual(plain.json);
    expect(lines.some((l) => l.protocolVersion === version && l.path === path && l.level === 30)).toBe(true);
  });
});

describe("CORS for browser-based clients", () => {
  const origin = "http://inspector.localhost:6274";

  it.each(["/.well-known/oauth-authorization-server", "/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"])(
    "allows any origin to read %s",
    async (path) => {
      const res = await send(`${t.url}${path}`, { headers: { origin } });
      expect(res.headers.get("access-control-allow-origin")).toBe("*");
      expect(res.headers.get("access-control-allow-credentials")).toBeNull();
    },
  );

  it.each([
    ["/.well-known/oauth-authorization-server", "GET"],
    ["/register", "POST"],
    ["/token", "POST"],
    ["/revoke", "POST"],
  ])("answers the preflight of %s", async (path, method) => {
    const res = await send(`${t.url}${path}`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": method, "access-control-request-headers": "authorization, content-type, mcp-protocol-version" },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-allow-methods")).toContain(method);
    const allowed = (res.headers.get("access-control-allow-headers") ?? "").toLowerCase();
    for (const h of ["authorization", "content-type", "mcp-protocol-version", "context-protocol-version"]) expect(allowed).toContain(h);
    expect(res.headers.get("access-control-allow-credentials")).toBeNull();
  });

  it("exposes WWW-Authenticate on a token endpoint error", async () => {
    const res = await postForm(`${t.url}/token`, { grant_type: "authorization_code", code: "x", client_id: "nobody" }, { origin });
    expect(res.status).toBe(401);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(res.headers.get("access-control-expose-headers")?.toLowerCase()).toContain("www-authenticate");
    expect(res.headers.get("www-authenticate")).toMatch(/^Basic /);
  });

  it("sends CORS headers with registration responses, success and error", async () => {
    const ok = await postJson(
      `${t.url}/register`,
      { redirect_uris: ["http://localhost:3000/cb"], token_endpoint_auth_method: "none" },
      { origin, "x-forwarded-for": "10.9.9.1" },
    );
    expect(ok.status).toBe(201);
    expect(ok.headers.get("access-control-allow-origin")).toBe("*");
    const bad = await postJson(`${t.url}/register`, { redirect_uris: ["http://example.com/cb"] }, { origin, "x-forwarded-for": "10.9.9.1" });
    expect(bad.status).toBe(400);
    expect(bad.headers.get("access-control-allow-origin")).toBe("*");
  });

  it.each([
    ["GET", "/token", "POST"],
    ["GET", "/revoke", "POST"],
    ["GET", "/register", "POST"],
    ["GET", "/introspect", "POST"],
    ["DELETE", "/.well-known/oauth-authorization-server", "GET"],
  ])("answers %s %s with 405 and Allow: %s", async (method, path, allowed) => {
    const res = await send(`${t.url}${path}`, { method });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toContain(allowed);
  });

  it("does not offer CORS on the introspection endpoint (server to server)", async () => {
    const preflight = await send(`${t.url}/introspect`, { method: "OPTIONS", headers: { origin, "access-control-request-method": "POST" } });
    expect(preflight.headers.get("access-control-allow-origin")).toBeNull();
    const res = await postForm(`${t.url}/introspect`, { token: "x" }, { origin });
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("a PUBLIC_URL with a path", () => {
  let b: TestBroker;
  let origin: string;
  let issuer: string;
  beforeAll(async () => {
    ({ broker: b, origin, issuer } = await startBrokerUnderPath());
  });
  afterAll(async () => b.stop());

  it("serves the metadata at the path-inserted well-known URL, with endpoints under the path", async () => {
    const res = await send(`${origin}/.well-known/oauth-authorization-server/broker`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({
      issuer,
      authorization_endpoint: `${issuer}/authorize`,
      token_endpoint: `${issuer}/token`,
      registration_endpoint: `${issuer}/register`,
    });
    // Served relative to PUBLIC_URL as well.
    expect((await send(`${issuer}/.well-known/oauth-authorization-server`)).json).toEqual(res.json);
  });

  it.each([
    "/broker/.well-known/oauth-protected-resource/mcp",
    "/.well-known/oauth-protected-resource/broker/mcp",
    "/.well-known/oauth-protected-resource/mcp",
  ])("serves the protected resource metadata at %s", async (path) => {
    const res = await send(`${origin}${path}`);
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ resource: `${issuer}/mcp`, authorization_servers: [issuer] });
  });

  it.each(["", "/broker"])("accepts registrations and authorization requests under %j (the 2025-03-26 defaults live at the origin)", async (prefix) => {
    const client = await registerTestClient(`${origin}${prefix}`);
    const res = await send(authorizeUrl(`${origin}${prefix}`, client, { resource: `${issuer}/mcp` }).href);
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toMatch(new RegExp(`^${issuer}/consent\\?transaction=`));
  });

  it.each(["", "/broker"])("has a token endpoint under %j", async (prefix) => {
    const res = await postForm(`${origin}${prefix}/token`, { grant_type: "authorization_code", code: "x", client_id: "nobody" });
    expect(res.status).toBe(401);
    expect(res.json!.error).toBe("invalid_client");
  });
});
