// Scopes as MCP 2025-11-25 / 2026-07-28 describe them, over real HTTP:
// - `offline_access` asks for refresh tokens and is no requirement of the resource: it never
//   appears in a 401/403 challenge's scope or in the protected resource metadata (SHOULD NOT).
// - servers "MUST account for scope hierarchies": with SCOPE_IMPLIES=docs:write=docs:read a grant
//   for docs:write carries docs:read (the MCP server sees both), a remembered approval of docs:write
//   covers a later request for docs:read, and a token holding only a scope that implies the
//   endpoint's required one is enough at /mcp.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { authorize, redeemCode, registerClient, tokenRequest, type RegisteredTestClient } from "../support/oauth-flow.ts";
import { HttpBrowser, answerRecordingConsent } from "../support/http-browser.ts";
import { loadConfig } from "../../src/config/load.ts";
import { approvalCovers } from "../../src/grants/consents.ts";

/**
 * An MCP server stand-in that refuses as a real one would: tools/call `deny` → 401, `write` →
 * 403 insufficient_scope naming docs:write and offline_access; anything else → 200. It records the
 * X-Auth-Scopes it was sent.
 */
async function startRefusingServer() {
  const seenScopes: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      seenScopes.push(String(req.headers["x-auth-scopes"] ?? ""));
      const body = chunks.length ? (JSON.parse(Buffer.concat(chunks).toString()) as { id?: number; params?: { name?: string } }) : {};
      const refuse = (status: number, challenge: string) =>
        res
          .writeHead(status, { "content-type": "application/json", "www-authenticate": challenge })
          .end(JSON.stringify({ jsonrpc: "2.0", id: null, error: { code: -32000, message: "no" } }));
      if (body.params?.name === "deny") return refuse(401, 'Bearer realm="backend"');
      if (body.params?.name === "write") return refuse(403, 'Bearer error="insufficient_scope", scope="docs:write offline_access"');
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ jsonrpc: "2.0", id: body.id ?? null, result: {} }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`,
    seenScopes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

let backend: Awaited<ReturnType<typeof startRefusingServer>>;
let t: TestBroker;
beforeAll(async () => {
  backend = await startRefusingServer();
  t = await startBroker({
    MCP_SERVER_URL: backend.url,
    SCOPES_SUPPORTED: "mcp,docs:read,docs:write,admin,offline_access",
    SCOPE_DESCRIPTIONS: "docs:read=Read your documents;docs:write=Change your documents",
    SCOPE_IMPLIES: "docs:write=docs:read,admin=mcp docs:write",
  });
});
afterAll(async () => {
  await t?.stop();
  await backend?.close();
});

/** Authorizes `client` for `scope` (a user who allows) and redeems the code. */
async function tokensFor(client: RegisteredTestClient, scope: string) {
  const token = await redeemCode(t.url, client, await authorize(t.url, client, { scope, user: "dana" }));
  expect(token.status).toBe(200);
  return token.body as { access_token: string; refresh_token: string; scope: string };
}

async function call(accessToken: string, tool: string): Promise<Response> {
  return fetch(`${t.url}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${accessToken}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: tool, arguments: {} } }),
  });
}

const challengeScope = (res: Response) => /scope="([^"]*)"/.exec(res.headers.get("www-authenticate") ?? "")?.[1];

describe("offline_access is no resource requirement", () => {
  it("is not in the protected resource metadata, though the authorization server supports it", async () => {
    const prm = (await (await fetch(`${t.url}/.well-known/oauth-protected-resource/mcp`)).json()) as { scopes_supported: string[] };
    expect(prm.scopes_supported).not.toContain("offline_access");
    expect(prm.scopes_supported).toEqual(expect.arrayContaining(["mcp", "docs:read", "docs:write"]));
    const as = (await (await fetch(`${t.url}/.well-known/oauth-authorization-server`)).json()) as { scopes_supported: string[] };
    expect(as.scopes_supported).toContain("offline_access");
  });

  it("is not echoed in the 401 and 403 challenges the broker gives for the MCP server, even when the token holds it", async () => {
    const client = await registerClient(t.url);
    const tokens = await tokensFor(client, "mcp offline_access");
    expect(tokens.scope.split(" ")).toContain("offline_access");

    const denied = await call(tokens.access_token, "deny");
    expect(denied.status).toBe(401);
    expect(challengeScope(denied)).toBe("mcp");

    const needsWrite = await call(tokens.access_token, "write");
    expect(needsWrite.status).toBe(403);
    expect(needsWrite.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
    // What it holds (less offline_access) and what it lacks; docs:read comes with docs:write.
    expect(challengeScope(needsWrite)).toBe("docs:write mcp");
  });
});

describe("SCOPE_IMPLIES", () => {
  it("grants what a scope implies with it: the token and the MCP server say docs:read with docs:write", async () => {
    const client = await registerClient(t.url);
    const tokens = await tokensFor(client, "docs:write");
    expect(tokens.scope).toBe("docs:read docs:write mcp");
    expect((await call(tokens.access_token, "read")).status).toBe(200);
    expect(backend.seenScopes.at(-1)).toBe("docs:read docs:write mcp");
  });

  it("shows the implied scope on the consent page, and a remembered approval of docs:write covers docs:read", async () => {
    const client = await registerClient(t.url);
    const browser = new HttpBrowser();
    const pages: string[] = [];
    const recording = answerRecordingConsent("erin", pages);
    const walk = async (scope: string) => {
      const url = new URL(`${t.url}/authorize`);
      const params = {
        response_type: "code",
        client_id: client.client_id,
        redirect_uri: client.redirect_uri,
        code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
        code_challenge_method: "S256",
        state: "s",
        scope,
        resource: `${t.url}/mcp`,
      };
      for (const [k, v] of Object.entries(params)) url.searchParams.set(k, v);
      return browser.walk(url.href, client.redirect_uri, recording);
    };
    expect((await walk("docs:write")).searchParams.get("code")).toEqual(expect.any(String));
    expect(pages).toHaveLength(1);
    expect(pages[0]).toContain("Change your documents");
    expect(pages[0]).toContain("Read your documents");
    // Less than was approved, by the operator's hierarchy: no second page.
    expect((await walk("docs:read")).searchParams.get("code")).toEqual(expect.any(String));
    expect(pages).toHaveLength(1);
    // More than was approved: the page again.
    expect((await walk("admin")).searchParams.get("code")).toEqual(expect.any(String));
    expect(pages).toHaveLength(2);
  });

  it("lets a token whose scope implies the endpoint's required one through /mcp", async () => {
    const client = await registerClient(t.url);
    const tokens = await tokensFor(client, "admin");
    expect(tokens.scope).toBe("admin docs:read docs:write mcp");
    // Narrowed on refresh to admin alone: admin implies mcp, which /mcp requires.
    const narrowed = await tokenRequest(t.url, {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: client.client_id,
      scope: "admin",
    });
    expect(narrowed.status).toBe(200);
    expect(narrowed.body.scope).toBe("admin");
    expect((await call(String(narrowed.body.access_token), "read")).status).toBe(200);
  });

  it("is refused at start with a line naming the variable when it is malformed or names unknown scopes", () => {
    const env = { SECRET_KEY: "a".repeat(64), SCOPES_SUPPORTED: "mcp,docs:read,docs:write" };
    expect(() => loadConfig({ ...env, SCOPE_IMPLIES: "docs:write" })).toThrow(
      /^SCOPE_IMPLIES: expected entries like docs:write=docs:read,admin=docs:write, got "docs:write"$/,
    );
    expect(() => loadConfig({ ...env, SCOPE_IMPLIES: "docs:write=docs:delete" })).toThrow(
      /^SCOPE_IMPLIES: names the scope "docs:delete", which SCOPES_SUPPORTED does not list/,
    );
    expect(() => loadConfig({ ...env, SCOPE_IMPLIES: "docs:write=offline_access" })).toThrow(/^SCOPE_IMPLIES: offline_access/);
    // Transitive, and a cycle is only scopes that imply each other.
    expect(loadConfig({ ...env, SCOPE_IMPLIES: "docs:write=docs:read,docs:read=mcp" }).clients.scopes.implies).toEqual({
      "docs:write": ["docs:read", "mcp"],
      "docs:read": ["mcp"],
    });
    expect(loadConfig({ ...env, SCOPE_IMPLIES: "docs:write=docs:read,docs:read=docs:write" }).clients.scopes.implies).toEqual({
      "docs:write": ["docs:read"],
      "docs:read": ["docs:write"],
    });
  });
});

describe("which remembered approval stands for a request", () => {
  const implies = { "docs:write": ["docs:read"], admin: ["docs:read", "docs:write", "mcp"] };
  it.each([
    [["docs:write", "mcp"], ["docs:read", "mcp"], true],
    [["docs:read", "docs:write", "mcp"], ["docs:read", "mcp"], true],
    [["mcp", "offline_access"], ["mcp", "offline_access"], true],
    // Leaving a scope out is another request (as before hierarchies): the page again.
    [["mcp", "offline_access"], ["mcp"], false],
    [["docs:read", "mcp"], ["docs:write", "mcp"], false],
    [["docs:write", "mcp"], ["docs:read", "mcp", "offline_access"], false],
  ])("approved %j, asked %j: %p", (approved, asked, expected) => {
    expect(approvalCovers(approved, asked, implies)).toBe(expected);
  });
});
