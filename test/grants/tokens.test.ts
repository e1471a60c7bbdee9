// The token machinery at the domain level, for grants without an upstream session
// (client_credentials): issuance, validation cache, revocation, introspection, sweep.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { insertClient, machineGrantsHarness, presented, type GrantsHarness } from "../support/grants-harness.ts";
import { CredentialRejected, InvalidScope, InvalidTarget } from "../../src/grants/errors.ts";
import { hashPresentedToken } from "../../src/grants/token-format.ts";
import { createMcpSessionStore } from "../../src/store/mcp-sessions.ts";
import { randomUUID } from "node:crypto";
import type { RegisteredClient, TokenResponse } from "../../src/grants/types.ts";

let h: GrantsHarness;
let service: RegisteredClient;

/** A client_credentials grant (its answer is always the broker's own tokens). */
const issueFor = async (client: RegisteredClient, params: Record<string, string> = {}): Promise<TokenResponse> =>
  (await h.grants.tokens.grant(presented(client), { grant_type: "client_credentials", ...params })) as TokenResponse;

beforeAll(async () => {
  h = await machineGrantsHarness({ ACCESS_TOKEN_TTL_SECONDS: "60" });
  service = await insertClient(h.database);
});
afterAll(async () => h.close());

describe("client_credentials", () => {
  it("issues an opaque 256-bit access token bound to the resource, and no refresh token", async () => {
    const res = await issueFor(service);
    expect(res.access_token).toMatch(/^mab_at_[A-Za-z0-9_-]{43}[0-9a-f]{12}$/);
    expect(res.token_type).toBe("Bearer");
    expect(res.expires_in).toBe(60);
    expect(res.scope).toBe("mcp");
    expect(res).not.toHaveProperty("refresh_token");
    const row = await h.database.db.accessToken.findFirstOrThrow({ where: { clientId: service.id } });
    expect(row.tokenHash).not.toContain(res.access_token);
    expect(row.resource).toBe("http://127.0.0.1:9/mcp");
  });

  it("gives the rows it inserts per token request time-ordered ids (UUID version 7), so their index inserts append", async () => {
    const client = await insertClient(h.database);
    for (let i = 0; i < 5; i++) await issueFor(client);
    const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
    const where = { where: { clientId: client.id }, orderBy: { createdAt: "asc" as const } };
    const tokens = (await h.database.db.accessToken.findMany(where)).map((r) => r.id);
    const events = (await h.database.db.auditEvent.findMany({ where: { clientId: client.id }, orderBy: { at: "asc" } })).map((r) => r.id);
    expect(tokens).toHaveLength(5);
    expect(events.length).toBeGreaterThanOrEqual(5);
    for (const ids of [tokens, events]) {
      for (const id of ids) expect(id).toMatch(V7);
      // Later rows sort after earlier ones (random version 4 ids would land anywhere).
      expect([...ids].sort()).toEqual(ids);
    }
  });

  it("refuses public clients and clients not registered for the grant", async () => {
    const publicClient = await insertClient(h.database, { tokenEndpointAuthMethod: "none" });
    await expect(issueFor(publicClient)).rejects.toMatchObject({ code: "unauthorized_client", description: expect.stringContaining("confidential") });
    const codeOnly = await insertClient(h.database, { grantTypes: ["authorization_code"] });
    await expect(issueFor(codeOnly)).rejects.toMatchObject({
      code: "unauthorized_client",
      description: "This client is not registered for the client_credentials grant.",
    });
    const selfRegistered = await insertClient(h.database, { registrationType: "dynamic" });
    await expect(issueFor(selfRegistered)).rejects.toMatchObject({ code: "unauthorized_client", description: expect.stringContaining("operator registered") });
  });

  it("parses its parameters in declared order, each problem as its own error", async () => {
    await expect(issueFor(service, { resource: "https://other.example/mcp", scope: "admin" })).rejects.toBeInstanceOf(InvalidTarget);
    await expect(issueFor(service, { scope: "admin" })).rejects.toBeInstanceOf(InvalidScope);
    await expect(h.grants.tokens.grant(presented(service), {})).rejects.toMatchObject({ code: "invalid_request", description: "grant_type is required." });
    await expect(h.grants.tokens.grant(presented(service), { grant_type: "password" })).rejects.toMatchObject({
      code: "unsupported_grant_type",
      description: "grant_type password is not supported.",
    });
    const res = await issueFor(service, { resource: "http://127.0.0.1:9/mcp/", scope: "mcp" });
    expect(res.scope).toBe("mcp");
  });
});

describe("validation cache", () => {
  it("answers repeated validations without touching the database", async () => {
    const { access_token } = await issueFor(service);
    const first = await h.grants.validator.validate(access_token);
    expect(first.clientId).toBe(service.id);
    expect(first.subject).toBe(`client:${service.id}`);
    await h.grants.usage.flush();
    const before = h.database.queryCount();
    for (let i = 0; i < 100; i++) await h.grants.validator.validate(access_token);
    expect(h.database.queryCount() - before).toBe(0);
  });

  it("shares one database read between concurrent first validations", async () => {
    const { access_token } = await issueFor(service);
    await h.grants.usage.flush();
    const before = h.database.queryCount();
    await Promise.all(Array.from({ length: 50 }, () => h.grants.validator.validate(access_token)));
    await h.grants.usage.flush();
    // One read of the token (+ at most one coalesced last-used write).
    expect(h.database.queryCount() - before).toBeLessThanOrEqual(2);
  });

  it("evicts at once when the token is revoked in this process", async () => {
    const { access_token } = await issueFor(service);
    await h.grants.validator.validate(access_token);
    await h.grants.tokens.revoke(service, { token: access_token });
    await expect(h.grants.validator.validate(access_token)).rejects.toBeInstanceOf(CredentialRejected);
  });

  it("evicts every token of a grant revoked by the operator", async () => {
    const { access_token } = await issueFor(service);
    const v = await h.grants.validator.validate(access_token);
    await h.grants.lifecycle.revokeGrant(v.grantId, "operator");
    await expect(h.grants.validator.validate(access_token)).rejects.toThrow(/revoked/);
    const grant = await h.database.db.grant.findUniqueOrThrow({ where: { id: v.grantId } });
    expect(grant.revokedReason).toBe("operator");
  });

  it("refuses unknown tokens and tokens for another audience", async () => {
    await expect(h.grants.validator.validate("mab_at_unknown")).rejects.toBeInstanceOf(CredentialRejected);
    const { access_token } = await issueFor(service);
    await h.database.db.accessToken.update({ where: { tokenHash: hashPresentedToken(access_token) }, data: { resource: "https://other.example/mcp" } });
    await expect(h.grants.validator.validate(access_token)).rejects.toThrow(/not issued for this resource/);
  });
});

describe("revocation and introspection", () => {
  it("ignores other clients' tokens and unknown tokens (RFC 7009)", async () => {
    const other = await insertClient(h.database);
    const { access_token } = await issueFor(service);
    await h.grants.tokens.revoke(other, { token: access_token, token_type_hint: "access_token" });
    await expect(h.grants.validator.validate(access_token)).resolves.toMatchObject({ clientId: service.id });
    await expect(h.grants.tokens.revoke(service, { token: "nothing" })).resolves.toBeUndefined();
  });

  it("describes live tokens to their client and nothing to others", async () => {
    const { access_token } = await issueFor(service);
    const live = await h.grants.tokens.introspect(service, { token: access_token });
    expect(live).toMatchObject({
      active: true,
      client_id: service.id,
      scope: "mcp",
      aud: "http://127.0.0.1:9/mcp",
      iss: "http://127.0.0.1:9",
      token_type: "Bearer",
    });
    const other = await insertClient(h.database);
    expect(await h.grants.tokens.introspect(other, { token: access_token })).toEqual({ active: false });
    await h.grants.tokens.revoke(service, { token: access_token });
    expect(await h.grants.tokens.introspect(service, { token: access_token })).toEqual({ active: false });
  });
});

describe("sweep", () => {
  it("revokes timed-out grants and removes expired and long-dead rows", async () => {
    const { access_token } = await issueFor(service);
    const v = await h.grants.validator.validate(access_token);
    const past = new Date(Date.now() - 3600_000);
    await h.database.db.grant.update({ where: { id: v.grantId }, data: { idleExpiresAt: past } });
    await h.database.db.accessToken.updateMany({ where: { grantId: v.grantId }, data: { expiresAt: past } });
    const result = await h.grants.sweep();
    expect(result.timedOut).toBeGreaterThanOrEqual(1);
    expect(result.accessTokens).toBeGreaterThanOrEqual(1);
    expect(await h.database.db.accessToken.count({ where: { grantId: v.grantId } })).toBe(0);
    const grant = await h.database.db.grant.findUniqueOrThrow({ where: { id: v.grantId } });
    expect(grant.revokedReason).toBe("idle_timeout");
    // Long after death the grant itself goes.
    const later = await h.grants.sweep({ now: new Date(Date.now() + 8 * 86400_000) });
    expect(later.grants).toBeGreaterThanOrEqual(1);
    expect(await h.database.db.grant.count({ where: { id: v.grantId } })).toBe(0);
  });

  it("removes MCP session bindings once older than the longest a grant lives (SESSION_MAX_AGE_SECONDS)", async () => {
    const binding = createMcpSessionStore(h.database);
    const session = randomUUID();
    await binding.claim(session, "github:sweep");
    const maxAgeMs = h.grants.context.config.sessionMaxAgeSeconds * 1000;
    expect((await h.grants.sweep({ now: new Date(Date.now() + maxAgeMs - 60_000) })).mcpSessions).toBe(0);
    expect((await h.grants.sweep({ now: new Date(Date.now() + maxAgeMs + 60_000) })).mcpSessions).toBe(1);
    expect(await h.database.db.mcpSession.count({ where: { owner: "github:sweep" } })).toBe(0);
  });
});
