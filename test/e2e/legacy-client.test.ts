// End to end for MCP clients of the 2025-03-26 revision, which know no protected-resource
// metadata: they look for authorization server metadata at the MCP server's base URL (with the
// protocol version header), and fall back to the default paths /authorize, /token and /register
// when there is none. The flow here is plain fetch for the client and Chromium for the user.
import { expect, it } from "@jest/globals";
import { createHash, randomBytes } from "node:crypto";
import { z } from "zod";
import { clickThrough, describeWithChromium, useBrokerAndCallback, newUser, useChromium } from "../support/browser.ts";

const PROTOCOL = "2025-03-26";

const Metadata = z.object({
  issuer: z.string(),
  authorization_endpoint: z.string(),
  token_endpoint: z.string(),
  registration_endpoint: z.string(),
  response_types_supported: z.array(z.string()),
  code_challenge_methods_supported: z.array(z.string()),
  grant_types_supported: z.array(z.string()),
});
const Tokens = z.object({ access_token: z.string(), token_type: z.string(), expires_in: z.number(), refresh_token: z.string(), scope: z.string() });
const JsonRpcResult = z.object({ jsonrpc: z.literal("2.0"), id: z.number(), result: z.record(z.string(), z.unknown()) });

/** A 2025-03-26 MCP client speaking JSON-RPC over Streamable HTTP with plain fetch. */
class LegacyMcpClient {
  private sessionId: string | null = null;
  private nextId = 1;
  constructor(
    private readonly url: string,
    private readonly accessToken: string,
  ) {}

  async request(method: string, params: Record<string, unknown> = {}): Promise<Record<string, unknown>> {
    const id = this.nextId++;
    const res = await this.post({ jsonrpc: "2.0", id, method, params });
    if (res.status !== 200) throw new Error(`${method}: HTTP ${res.status} ${await res.text()}`);
    this.sessionId ??= res.headers.get("mcp-session-id");
    const body = await res.text();
    // The answer is JSON, or an event stream whose data lines carry the JSON-RPC messages.
    const messages = res.headers.get("content-type")?.startsWith("text/event-stream")
      ? body
          .split("\n")
          .filter((l) => l.startsWith("data: "))
          .map((l) => JSON.parse(l.slice(6)) as unknown)
      : [JSON.parse(body) as unknown];
    const answer = messages.map((m) => JsonRpcResult.safeParse(m)).find((m) => m.success && m.data.id === id);
    if (!answer?.success) throw new Error(`${method}: no result in ${body}`);
    return answer.data.result;
  }

  async notify(method: string): Promise<number> {
    return (await this.post({ jsonrpc: "2.0", method })).status;
  }

  private post(message: Record<string, unknown>): Promise<Response> {
    return fetch(this.url, {
      method: "POST",
      headers: {
        authorization: `Bearer ${this.accessToken}`,
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        ...(this.sessionId ? { "mcp-session-id": this.sessionId } : {}),
      },
      body: JSON.stringify(message),
    });
  }
}

const chromium = useChromium();

describeWithChromium(`a ${PROTOCOL} MCP client`, () => {
  const env = useBrokerAndCallback(chromium);

  it.each(["MCP-Protocol-Version", "Context-Protocol-Version"])("finds authorization server metadata at the base URL (%s header)", async (header) => {
    // 2025-03-26: the authorization base URL is the MCP server URL without its path.
    const base = new URL(`${env.broker.url}/mcp`).origin;
    const res = await fetch(`${base}/.well-known/oauth-authorization-server`, { headers: { [header]: PROTOCOL } });
    expect(res.status).toBe(200);
    const metadata = Metadata.parse(await res.json());
    expect(metadata).toMatchObject({
      issuer: env.broker.url,
      authorization_endpoint: `${base}/authorize`,
      token_endpoint: `${base}/token`,
      registration_endpoint: `${base}/register`,
    });
    expect(metadata.code_challenge_methods_supported).toContain("S256");
    expect(metadata.grant_types_supported).toEqual(expect.arrayContaining(["authorization_code", "refresh_token"]));
  });

  it("without metadata, registers, authorizes and gets tokens at the default paths, then uses the tools", async () => {
    const base = new URL(`${env.broker.url}/mcp`).origin;
    const registered = await fetch(`${base}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "Legacy 2025-03-26 client",
        redirect_uris: [env.callback.url],
        token_endpoint_auth_method: "none",
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      }),
    });
    expect(registered.status).toBe(201);
    const { client_id } = z.object({ client_id: z.string() }).parse(await registered.json());

    // No `resource` parameter: that revision had none; the broker's one protected resource is meant.
    const verifier = randomBytes(32).toString("base64url");
    const state = randomBytes(8).toString("hex");
    const authorize = new URL(`${base}/authorize`);
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id,
      redirect_uri: env.callback.url,
      code_challenge: createHash("sha256").update(verifier).digest("base64url"),
      code_challenge_method: "S256",
      state,
    })) {
      authorize.searchParams.set(k, v);
    }
    const context = await newUser(chromium.browser);
    try {
      const page = await context.newPage();
      const { callback: landed, pages } = await clickThrough(page, authorize, { user: "lena", name: "e2e-legacy-default-paths" });
      expect(pages.map((p) => p.kind)).toEqual(["consent", "demo-login", "callback"]);
      expect(pages[0]!.text).toContain("It calls itself “Legacy 2025-03-26 client”");
      expect(landed.searchParams.get("state")).toBe(state);
      const outcome = await env.callback.next();
      expect(outcome.code).toBe(landed.searchParams.get("code"));

      const token = await fetch(`${base}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code: outcome.code!,
          redirect_uri: env.callback.url,
          code_verifier: verifier,
          client_id,
        }),
      });
      expect(token.status).toBe(200);
      const tokens = Tokens.parse(await token.json());
      expect(tokens.token_type.toLowerCase()).toBe("bearer");

      const mcp = new LegacyMcpClient(`${env.broker.url}/mcp`, tokens.access_token);
      const init = await mcp.request("initialize", { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "legacy", version: "0.1" } });
      expect(init.protocolVersion).toBe(PROTOCOL);
      expect(await mcp.notify("notifications/initialized")).toBe(202);
      const who = await mcp.request("tools/call", { name: "whoami", arguments: {} });
      const text = z.object({ content: z.array(z.object({ type: z.literal("text"), text: z.string() })) }).parse(who).content[0]!.text;
      expect(JSON.parse(text)).toMatchObject({ subject: "demo:lena", clientId: client_id, authorization: null, cookie: null });

      const refreshed = await fetch(`${base}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: tokens.refresh_token, client_id }),
      });
      expect(refreshed.status).toBe(200);
      expect(Tokens.parse(await refreshed.json()).access_token).not.toBe(tokens.access_token);
    } finally {
      await context.close();
    }
  });
});
