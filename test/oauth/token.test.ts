// The /token handler: form-encoded only, never cached, client authentication by the
// registered method, grant dispatch, and every RFC 6749 §5.2 error code.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { authorize } from "../support/oauth-flow.ts";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { basicAuth, postForm, postJson, registerClientSet, registerTestClient, type HttpResult, type TestClient, tamper } from "../support/oauth-client.ts";

let t: TestBroker;
let pub: TestClient;
let basic: TestClient;
let post: TestClient;
let machine: TestClient;
let codeOnly: TestClient;
beforeAll(async () => {
  // No background poll of the revocation feed: the statement counts below would catch one.
  t = await startBroker({ TRUST_PROXY: "true" }, { revocationPollMs: 3_600_000 });
  [{ pub, basic, post, machine }, codeOnly] = await Promise.all([
    registerClientSet(t.url, t.broker.database.db),
    registerTestClient(t.url, { grant_types: ["authorization_code"] }),
  ]);
});
afterAll(async () => t.stop());

const token = (form: Record<string, string> | string, headers: Record<string, string> = {}) => postForm(`${t.url}/token`, form, headers);
const resource = () => `${t.url}/mcp`;

/** Runs /authorize → consent → demo login for `client` and returns the code and its verifier. */
async function codeFor(client: TestClient, scope?: string): Promise<{ code: string; verifier: string; callback: URL; state: string }> {
  const { callback, verifier, state } = await authorize(t.url, client, { ...(scope ? { scope } : {}) });
  const code = callback.searchParams.get("code");
  if (!code) throw new Error(`no code: ${callback.href}`);
  return { code, verifier, callback, state };
}

function codeForm(client: TestClient, c: { code: string; verifier: string }, extra: Record<string, string> = {}): Record<string, string> {
  return { grant_type: "authorization_code", code: c.code, code_verifier: c.verifier, redirect_uri: client.redirect_uri, resource: resource(), ...extra };
}

function expectError(res: HttpResult, error: string, status = 400): void {
  expect({ status: res.status, error: res.json?.error }).toEqual({ status, error });
  expect(res.json!.error_description).toEqual(expect.any(String));
  expect(res.headers.get("cache-control")).toBe("no-store");
  if (error === "invalid_client") expect(res.headers.get("www-authenticate")).toBe('Basic realm="mcp-auth-broker"');
}

function expectTokens(res: HttpResult): Record<string, unknown> {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^application\/json/);
  expect(res.headers.get("cache-control")).toBe("no-store");
  expect(res.headers.get("pragma")).toBe("no-cache");
  expect(res.json).toMatchObject({ access_token: expect.any(String), token_type: "Bearer", expires_in: expect.any(Number), scope: expect.any(String) });
  return res.json!;
}

describe("successful requests", () => {
  it("a public client exchanges a code (client_id only, PKCE) and refreshes", async () => {
    const c = await codeFor(pub, "mcp offline_access");
    expect(c.callback.searchParams.get("iss")).toBe(t.url);
    expect(c.callback.searchParams.get("state")).toBe(c.state);
    const tokens = expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id })));
    expect(tokens.scope).toBe("mcp offline_access");
    expect(tokens.refresh_token).toEqual(expect.any(String));
    const narrowed = expectTokens(
      await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token as string, client_id: pub.client_id, scope: "mcp" }),
    );
    expect(narrowed.scope).toBe("mcp");
    expect(narrowed.refresh_token).not.toBe(tokens.refresh_token);
  });

  it("a refresh within the re-check window is two statements: the token with its client, grant and upstream session; the rotation", async () => {
    const c = await codeFor(pub, "mcp offline_access");
    const tokens = expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id })));
    const before = t.broker.database.queryCount();
    expectTokens(await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token as string, client_id: pub.client_id }));
    expect(t.broker.database.queryCount() - before).toBe(2);
  });

  it("a confidential client's refresh is two statements too: its secret is checked against the client row read with the token", async () => {
    const c = await codeFor(basic, "mcp offline_access");
    const auth = { authorization: basicAuth(basic.client_id, basic.client_secret!) };
    const tokens = expectTokens(await token(codeForm(basic, c), auth));
    const before = t.broker.database.queryCount();
    expectTokens(await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token as string }, auth));
    expect(t.broker.database.queryCount() - before).toBe(2);
  });

  it("a code exchange is two statements: the code with its client and grant; the exchange", async () => {
    // A first exchange records the client's use (at most once a minute): the one counted does not.
    expectTokens(await token(codeForm(pub, await codeFor(pub, "mcp offline_access"), { client_id: pub.client_id })));
    const c = await codeFor(pub, "mcp offline_access");
    const before = t.broker.database.queryCount();
    expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id })));
    expect(t.broker.database.queryCount() - before).toBe(2);
  });

  it("a confidential client's code exchange is two statements too: its secret is checked against the client row read with the code", async () => {
    const auth = { authorization: basicAuth(basic.client_id, basic.client_secret!) };
    expectTokens(await token(codeForm(basic, await codeFor(basic, "mcp offline_access")), auth));
    const c = await codeFor(basic, "mcp offline_access");
    const before = t.broker.database.queryCount();
    expectTokens(await token(codeForm(basic, c), auth));
    expect(t.broker.database.queryCount() - before).toBe(2);
  });

  it("a client_secret_basic client authenticates with HTTP Basic", async () => {
    const c = await codeFor(basic);
    expectTokens(await token(codeForm(basic, c), { authorization: basicAuth(basic.client_id, basic.client_secret!) }));
  });

  it("decodes Basic credentials as RFC 6749 §2.3.1 says (form-urlencoded before base64)", async () => {
    const c = await codeFor(basic);
    const pct = (v: string) => [...v].map((ch) => `%${ch.charCodeAt(0).toString(16).padStart(2, "0")}`).join("");
    const header = `Basic ${Buffer.from(`${pct(basic.client_id)}:${pct(basic.client_secret!)}`).toString("base64")}`;
    expectTokens(await token(codeForm(basic, c), { authorization: header }));
  });

  it("a client_secret_post client authenticates with client_id and client_secret in the body", async () => {
    const c = await codeFor(post);
    expectTokens(await token(codeForm(post, c, { client_id: post.client_id, client_secret: post.client_secret! })));
  });

  it("a client_id in the body next to matching Basic credentials is fine", async () => {
    const c = await codeFor(basic);
    expectTokens(await token(codeForm(basic, c, { client_id: basic.client_id }), { authorization: basicAuth(basic.client_id, basic.client_secret!) }));
  });

  it("accepts a resource in another spelling of the canonical URI, and none at all (2025-03-26)", async () => {
    const spelled = `${t.url.replace("http://", "HTTP://")}/mcp/`;
    const c1 = await codeFor(pub);
    expectTokens(await token(codeForm(pub, c1, { client_id: pub.client_id, resource: spelled })));
    const c2 = await codeFor(pub);
    const form = codeForm(pub, c2, { client_id: pub.client_id });
    delete form.resource;
    expectTokens(await token(form));
  });

  it("accepts the form with a charset parameter", async () => {
    const c = await codeFor(pub);
    expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id }), { "content-type": "application/x-www-form-urlencoded; charset=UTF-8" }));
  });

  it("issues client_credentials tokens to a confidential client (no refresh token)", async () => {
    const tokens = expectTokens(
      await token({ grant_type: "client_credentials", resource: resource() }, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
    );
    expect(tokens.scope).toBe("mcp");
    expect(tokens).not.toHaveProperty("refresh_token");
  });
});

describe("invalid_request", () => {
  const cases: [string, () => Promise<HttpResult>][] = [
    ["grant_type missing", () => token({ client_id: pub.client_id, code: "x" })],
    ["code missing", () => token({ grant_type: "authorization_code", client_id: pub.client_id, code_verifier: "v".repeat(43) })],
    ["refresh_token missing", () => token({ grant_type: "refresh_token", client_id: pub.client_id })],
    [
      "a JSON body",
      () => postJson(`${t.url}/token`, { grant_type: "client_credentials" }, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
    ],
    ["no content type", () => postForm(`${t.url}/token`, "grant_type=client_credentials", { "content-type": "" })],
    [
      "a duplicated parameter",
      () => token(`grant_type=client_credentials&grant_type=client_credentials`, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
    ],
  ];
  it.each(cases)("%s", async (_what, request) => expectError(await request(), "invalid_request"));

  it("code_verifier or redirect_uri missing", async () => {
    const c = await codeFor(pub);
    const noVerifier = codeForm(pub, c, { client_id: pub.client_id });
    delete noVerifier.code_verifier;
    expectError(await token(noVerifier), "invalid_request");
    const noRedirect = codeForm(pub, c, { client_id: pub.client_id });
    delete noRedirect.redirect_uri;
    expectError(await token(noRedirect), "invalid_request");
  });
});

describe("invalid_client: 401 with WWW-Authenticate: Basic", () => {
  const cc = { grant_type: "client_credentials" };
  const cases: [string, () => Promise<HttpResult>][] = [
    ["no client identification at all", () => token(cc)],
    ["an unknown client_id", () => token({ ...cc, client_id: "mab_c_unknown000000000000000" })],
    ["an unknown client in Basic", () => token(cc, { authorization: basicAuth("mab_c_unknown000000000000000", "x") })],
    ["a public client sending a secret", () => token({ ...cc, client_id: pub.client_id, client_secret: "anything" })],
    ["a public client using Basic", () => token(cc, { authorization: basicAuth(pub.client_id, "") })],
    ["a Basic client sending no secret", () => token({ ...cc, client_id: machine.client_id })],
    ["a Basic client using client_secret_post", () => token({ ...cc, client_id: machine.client_id, client_secret: machine.client_secret! })],
    [
      "a post client using Basic",
      () => token({ grant_type: "refresh_token", refresh_token: "x" }, { authorization: basicAuth(post.client_id, post.client_secret!) }),
    ],
    ["a wrong secret in Basic", () => token(cc, { authorization: basicAuth(machine.client_id, `${machine.client_secret!}x`) })],
    ["an empty secret in Basic", () => token(cc, { authorization: basicAuth(machine.client_id, "") })],
    ["a wrong secret in the body", () => token({ grant_type: "refresh_token", refresh_token: "x", client_id: post.client_id, client_secret: "mab_cs_wrong" })],
    [
      "both Basic and a body secret",
      () => token({ ...cc, client_secret: machine.client_secret! }, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
    ],
    [
      "a body client_id that differs from Basic",
      () => token({ ...cc, client_id: pub.client_id }, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
    ],
    ["Basic without a colon", () => token(cc, { authorization: `Basic ${Buffer.from(machine.client_id).toString("base64")}` })],
    ["Basic that is not base64", () => token(cc, { authorization: "Basic !!!not-base64!!!" })],
    ["a Bearer Authorization header", () => token(cc, { authorization: "Bearer abc" })],
  ];
  it.each(cases)("%s", async (_what, request) => expectError(await request(), "invalid_client", 401));

  // A refresh authenticates the client from the row read with the token: the same refusals as
  // reading the client first, and the refused requests change nothing.
  it("with the client's own live refresh token: a wrong secret, the wrong method, no secret, another id; the token works after", async () => {
    const c = await codeFor(post, "mcp offline_access");
    const tokens = expectTokens(await token(codeForm(post, c, { client_id: post.client_id, client_secret: post.client_secret! })));
    const refresh = { grant_type: "refresh_token", refresh_token: tokens.refresh_token as string };
    expectError(await token({ ...refresh, client_id: post.client_id, client_secret: "mab_cs_wrong" }), "invalid_client", 401);
    expectError(await token(refresh, { authorization: basicAuth(post.client_id, post.client_secret!) }), "invalid_client", 401);
    expectError(await token({ ...refresh, client_id: post.client_id }), "invalid_client", 401);
    expectError(await token({ ...refresh, client_id: "mab_c_unknown000000000000000" }), "invalid_client", 401);
    expectTokens(await token({ ...refresh, client_id: post.client_id, client_secret: post.client_secret! }));
  });
});

describe("invalid_grant", () => {
  it("an unknown code", async () => {
    expectError(
      await token({
        grant_type: "authorization_code",
        code: "mab_ac_unknown",
        code_verifier: "v".repeat(43),
        redirect_uri: pub.redirect_uri,
        client_id: pub.client_id,
      }),
      "invalid_grant",
    );
  });

  it("a code presented with its client's id and a wrong secret: invalid_client, and the code stays unused", async () => {
    // The code is read with its client before the secret is checked (one statement fewer); that read decides nothing.
    const c = await codeFor(basic, "mcp offline_access");
    expectError(await token(codeForm(basic, c), { authorization: basicAuth(basic.client_id, tamper(basic.client_secret!)) }), "invalid_client", 401);
    expectTokens(await token(codeForm(basic, c), { authorization: basicAuth(basic.client_id, basic.client_secret!) }));
  });

  it("a code issued to another client", async () => {
    const c = await codeFor(pub);
    expectError(await token(codeForm(codeOnly, c, { client_id: codeOnly.client_id })), "invalid_grant");
  });

  it("a wrong or malformed code_verifier", async () => {
    const c = await codeFor(pub);
    expectError(await token(codeForm(pub, { ...c, verifier: tamper(c.verifier) }, { client_id: pub.client_id })), "invalid_grant");
    expectError(await token(codeForm(pub, { ...c, verifier: "short" }, { client_id: pub.client_id })), "invalid_grant");
  });

  it("a redirect_uri other than the authorization request's", async () => {
    const c = await codeFor(pub);
    expectError(await token(codeForm(pub, c, { client_id: pub.client_id, redirect_uri: `${pub.redirect_uri}/x` })), "invalid_grant");
  });

  it("a loopback redirect_uri on another port than the one used at /authorize (RFC 8252 §7.3)", async () => {
    // Registered on 7777, authorized on 51234 (any port matches at /authorize); /token wants 51234.
    const used = { ...pub, redirect_uri: "http://127.0.0.1:51234/callback" };
    const c = await codeFor(used);
    for (const other of [pub.redirect_uri, "http://127.0.0.1:51235/callback"]) {
      expectError(await token(codeForm(pub, c, { client_id: pub.client_id, redirect_uri: other })), "invalid_grant");
    }
    expectTokens(await token(codeForm(used, c, { client_id: pub.client_id })));
  });

  it("a code used twice", async () => {
    const c = await codeFor(pub);
    expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id })));
    expectError(await token(codeForm(pub, c, { client_id: pub.client_id })), "invalid_grant");
  });

  it("an unknown refresh token, or another client's", async () => {
    expectError(await token({ grant_type: "refresh_token", refresh_token: "mab_rt_unknown", client_id: pub.client_id }), "invalid_grant");
    const c = await codeFor(pub);
    const tokens = expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id })));
    expectError(
      await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token as string, client_id: codeOnly.client_id }),
      "unauthorized_client",
    );
    expectError(
      await token({
        grant_type: "refresh_token",
        refresh_token: tokens.refresh_token as string,
        client_id: post.client_id,
        client_secret: post.client_secret!,
      }),
      "invalid_grant",
    );
  });
});

describe("refresh tokens only for clients registered for the refresh_token grant", () => {
  it("gives a client registered for authorization_code alone an access token and no refresh token", async () => {
    const c = await codeFor(codeOnly);
    const res = await token(codeForm(codeOnly, c, { client_id: codeOnly.client_id }));
    expect(res.status).toBe(200);
    expect(res.json).toMatchObject({ access_token: expect.any(String), token_type: "Bearer" });
    expect(res.json).not.toHaveProperty("refresh_token");
    expect(await t.broker.database.db.refreshToken.count({ where: { clientId: codeOnly.client_id } })).toBe(0);
  });

  it("gives one to a client that registered without grant_types (authorization_code + refresh_token by default)", async () => {
    const plain = await registerTestClient(t.url, { grant_types: undefined, response_types: undefined });
    expect(plain.grant_types).toEqual(["authorization_code", "refresh_token"]);
    const c = await codeFor(plain);
    expect(expectTokens(await token(codeForm(plain, c, { client_id: plain.client_id }))).refresh_token).toEqual(expect.any(String));
  });
});

describe("unauthorized_client: the grant is not registered for the client", () => {
  const cases: [string, () => Promise<HttpResult>][] = [
    ["a public client asking for client_credentials", () => token({ grant_type: "client_credentials", client_id: pub.client_id })],
    ["a client without refresh_token refreshing", () => token({ grant_type: "refresh_token", refresh_token: "x", client_id: codeOnly.client_id })],
    [
      "a client_credentials client exchanging a code",
      () => token({ grant_type: "authorization_code", code: "x" }, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
    ],
    [
      "a code client asking for client_credentials",
      () => token({ grant_type: "client_credentials", client_id: post.client_id, client_secret: post.client_secret! }),
    ],
  ];
  it.each(cases)("%s", async (_what, request) => expectError(await request(), "unauthorized_client"));
});

describe("the token-exchange grant for a client not registered for it", () => {
  it("is unauthorized_client: the grant exists, this public client may not use it", async () => {
    expectError(
      await token({
        grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
        client_id: pub.client_id,
        subject_token: "x",
        subject_token_type: "urn:ietf:params:oauth:token-type:jwt",
      }),
      "unauthorized_client",
    );
  });
});

describe("unsupported_grant_type", () => {
  it.each([
    "password",
    "implicit",
    "urn:ietf:params:oauth:grant-type:device_code",
    "urn:ietf:params:oauth:grant-type:jwt-bearer",
    "AUTHORIZATION_CODE",
    "authorization_code ",
  ])("%j", async (grantType) => {
    expectError(await token({ grant_type: grantType, client_id: pub.client_id, username: "a", password: "b" }), "unsupported_grant_type");
  });
});

describe("invalid_scope", () => {
  it("an unsupported scope for client_credentials", async () => {
    expectError(
      await token({ grant_type: "client_credentials", scope: "mcp admin" }, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
      "invalid_scope",
    );
  });

  it("a refresh that widens or names unknown scopes", async () => {
    const c = await codeFor(pub, "mcp");
    const tokens = expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id })));
    expect(tokens.scope).toBe("mcp");
    expectError(
      await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token as string, client_id: pub.client_id, scope: "mcp offline_access" }),
      "invalid_scope",
    );
    expectError(
      await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token as string, client_id: pub.client_id, scope: "root" }),
      "invalid_scope",
    );
    // The refresh token survived the refused requests.
    expectTokens(await token({ grant_type: "refresh_token", refresh_token: tokens.refresh_token as string, client_id: pub.client_id }));
  });
});

describe("invalid_target", () => {
  it.each([
    ["another host", "https://other.example.com/mcp"],
    ["another path", "/other"],
    ["a fragment", "/mcp#x"],
    ["not absolute", "mcp"],
    ["empty", ""],
  ])("a resource with %s", async (_what, value) => {
    const target = value.startsWith("/") ? `${t.url}${value}` : value;
    expectError(
      await token({ grant_type: "client_credentials", resource: target }, { authorization: basicAuth(machine.client_id, machine.client_secret!) }),
      "invalid_target",
    );
    const c = await codeFor(pub);
    expectError(await token(codeForm(pub, c, { client_id: pub.client_id, resource: target })), "invalid_target");
    // The code was not used up by the refused request.
    expectTokens(await token(codeForm(pub, c, { client_id: pub.client_id })));
  });
});
