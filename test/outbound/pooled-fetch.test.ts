// The identity provider's HTTP client, against real HTTP servers on 127.0.0.1: one keep-alive pool
// per origin (connections counted on the servers' side), the address policy on every connection
// (DNS answers come from the test: nothing here leaves the machine), fetch-shaped answers and
// failures, and the providers reporting an IdP behind a refused address as what to fix.
import http from "node:http";
import type { AddressInfo, LookupFunction } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "@jest/globals";
import { createPooledFetch, PooledAnswer, type PooledFetch } from "../../src/outbound/pooled-fetch.ts";
import { OutboundFetchError } from "../../src/outbound/fetch-error.ts";
import { GitHubProvider } from "../../src/upstream/github.ts";
import { OidcProvider } from "../../src/upstream/oidc.ts";

interface CountingServer {
  readonly url: string;
  readonly port: number;
  /** TCP connections accepted so far. */
  connections: number;
  /** Paths requested so far. */
  readonly paths: string[];
  close(): Promise<void>;
}

async function countingServer(): Promise<CountingServer> {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    paths.push(req.url ?? "");
    req.resume();
    req.on("end", () => {
      if (req.url === "/redirect") return void res.writeHead(302, { location: "/elsewhere" }).end();
      if (req.url === "/large") return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ pad: "x".repeat(4096) }));
      if (req.url === "/empty") return void res.writeHead(204).end();
      // Headers at once, then a byte every 50 ms and never the end: within every per-phase
      // timeout, so only a deadline on the whole request ends it.
      // An issuer's metadata, for the OIDC provider: its introspection answer trickles.
      if (req.url === "/.well-known/openid-configuration") {
        const issuer = `http://${req.headers.host}`;
        const endpoints = { authorization_endpoint: `${issuer}/authorize`, token_endpoint: `${issuer}/token`, introspection_endpoint: `${issuer}/drip` };
        return void res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ issuer, ...endpoints }));
      }
      if (req.url?.startsWith("/drip")) {
        res.writeHead(200, { "content-type": "application/json" });
        const timer = setInterval(() => res.write(" "), 50);
        res.on("close", () => clearInterval(timer));
        return;
      }
      res.writeHead(200, { "content-type": "application/json", "set-cookie": ["a=1", "b=2"] });
      res.end(JSON.stringify({ path: req.url, method: req.method, contentType: req.headers["content-type"] ?? null }));
    });
  });
  const state = { connections: 0 };
  server.on("connection", () => state.connections++);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    get connections() {
      return state.connections;
    },
    set connections(n: number) {
      state.connections = n;
    },
    paths,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** A resolver that answers every name with `address` and counts the questions. */
function answering(address: string): LookupFunction & { asked: string[] } {
  const asked: string[] = [];
  const lookup = ((hostname: string, options: { all?: boolean }, callback: (...args: unknown[]) => void) => {
    asked.push(hostname);
    const family = address.includes(":") ? 6 : 4;
    if (options.all) callback(null, [{ address, family }]);
    else callback(null, address, family);
  }) as unknown as LookupFunction & { asked: string[] };
  return Object.assign(lookup, { asked });
}

let a: CountingServer;
let b: CountingServer;
const clients: PooledFetch[] = [];
function client(options: Partial<Parameters<typeof createPooledFetch>[0]> = {}): PooledFetch {
  const c = createPooledFetch({ allowPrivateNetworks: true, timeoutMs: 2000, ...options });
  clients.push(c);
  return c;
}

beforeAll(async () => {
  a = await countingServer();
  b = await countingServer();
});
afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  a.connections = 0;
  b.connections = 0;
});
afterAll(async () => {
  await a.close();
  await b.close();
});

describe("pooled fetch", () => {
  it("keeps one pool per origin: requests to each origin reuse that origin's connection", async () => {
    const idp = client();
    for (let i = 0; i < 5; i++) {
      expect(await (await idp(`${a.url}/a${i}`)).json()).toMatchObject({ path: `/a${i}` });
      expect(await (await idp(`${b.url}/b${i}`)).json()).toMatchObject({ path: `/b${i}` });
    }
    expect(a.connections).toBe(1);
    expect(b.connections).toBe(1);
    expect(a.paths.filter((p) => p.startsWith("/b"))).toEqual([]);
    expect(b.paths.filter((p) => p.startsWith("/a"))).toEqual([]);
  });

  it("answers as fetch does: status, headers (repeated ones too), JSON, a form body with its content type", async () => {
    const idp = client();
    const res = await idp(`${a.url}/token?x=1`, { method: "POST", body: new URLSearchParams({ grant_type: "refresh_token" }) });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");
    expect(res.headers.getSetCookie()).toEqual(["a=1", "b=2"]);
    expect(await res.json()).toEqual({ path: "/token?x=1", method: "POST", contentType: "application/x-www-form-urlencoded;charset=UTF-8" });
    const empty = await idp(`${a.url}/empty`);
    expect(empty.status).toBe(204);
    expect(await empty.text()).toBe("");
  });

  it("answers without a Response too: status, headers in any case, repeated ones joined, text and JSON", async () => {
    const idp = client();
    const res = await idp.answer(`${a.url}/token`, { method: "POST", body: new URLSearchParams({ grant_type: "refresh_token" }) });
    expect(res).toBeInstanceOf(PooledAnswer);
    expect(res.ok).toBe(true);
    expect(res.header("Content-Type")).toBe("application/json");
    expect(res.header("set-cookie")).toBe("a=1, b=2");
    expect(res.header("x-absent")).toBeNull();
    expect(await res.json()).toEqual({ path: "/token", method: "POST", contentType: "application/x-www-form-urlencoded;charset=UTF-8" });
    const empty = await idp.answer(`${a.url}/empty`);
    expect([empty.status, empty.ok, empty.text()]).toEqual([204, true, ""]);
    const redirect = await idp.answer(`${a.url}/redirect`);
    expect([redirect.status, redirect.ok, redirect.header("location")]).toEqual([302, false, "/elsewhere"]);
    await expect((await idp.answer(`${a.url}/redirect`)).json()).rejects.toThrow(SyntaxError);
    await expect(client({ maxBytes: 1024 }).answer(`${a.url}/large`)).rejects.toMatchObject({ kind: "too-large" });
  });

  it("ends a request at its deadline even while the body still trickles in, in both shapes", async () => {
    const idp = client({ timeoutMs: 300 });
    await expect(idp.answer(`${a.url}/drip`)).rejects.toMatchObject({ name: "TimeoutError" });
    await expect(idp(`${a.url}/drip`)).rejects.toMatchObject({ name: "TimeoutError" });
    // The caller's own signal, when given, is the deadline instead.
    const caller = new AbortController();
    const pending = idp.answer(`${a.url}/drip`, { signal: caller.signal });
    caller.abort();
    await expect(pending).rejects.toMatchObject({ name: "AbortError" });
    // The pool is still good for the next request.
    expect((await idp.answer(`${a.url}/after`)).status).toBe(200);
  });

  it("never follows a redirect: the 3xx is the answer", async () => {
    const res = await client()(`${a.url}/redirect`, { redirect: "manual" });
    expect(res.status).toBe(302);
    expect(res.headers.get("location")).toBe("/elsewhere");
    expect(a.paths).not.toContain("/elsewhere");
  });

  it("refuses an answer larger than its cap", async () => {
    const failure = await client({ maxBytes: 1024 })(`${a.url}/large`).catch((err: unknown) => err);
    expect(failure).toBeInstanceOf(OutboundFetchError);
    expect(failure).toMatchObject({ kind: "too-large" });
  });

  it("refuses private and loopback addresses when the policy says so, by name or literal, without connecting", async () => {
    const lookup = answering("127.0.0.1");
    const strict = client({ allowPrivateNetworks: false, lookup });
    // Twice: a verdict remembered for an address literal refuses as the first one did.
    const urls = [`http://idp.example.test:${a.port}/x`, `${a.url}/x`, `http://[::1]:${a.port}/x`];
    for (const url of [...urls, ...urls]) {
      const failure = (await strict(url).catch((err: unknown) => err)) as TypeError;
      expect(failure).toBeInstanceOf(TypeError);
      expect(failure.message).toBe("fetch failed");
      expect(failure.cause).toBeInstanceOf(OutboundFetchError);
      expect((failure.cause as OutboundFetchError).message).toMatch(/a private, loopback or link-local address: it is not fetched/);
    }
    expect(lookup.asked).toEqual(["idp.example.test", "idp.example.test"]);
    expect(a.connections).toBe(0);
    // The same name, where the policy allows private networks (an operator's own IdP), connects.
    expect((await client({ allowPrivateNetworks: true, lookup })(`http://idp.example.test:${a.port}/ok`)).status).toBe(200);
    expect(a.connections).toBe(1);
  });

  it("refuses a cloud metadata address even where private networks are allowed", async () => {
    const failure = (await client({ lookup: answering("169.254.169.254") })(`http://idp.example.test:${a.port}/`).catch((err: unknown) => err)) as TypeError;
    expect((failure.cause as Error).message).toMatch(/resolves to 169\.254\.169\.254, a cloud metadata address/);
  });
});

describe("identity providers through the pooled client", () => {
  const toMetadata = () => client({ lookup: answering("169.254.169.254") });
  const githubAt = (githubUrl: string, apiUrl: string, timeoutMs: number, fetch: ReturnType<typeof client>) =>
    new GitHubProvider({ clientId: "Iv1.x", clientSecret: "s", githubUrl, apiUrl, scopes: "read:user", timeoutMs, fetch });

  it("GitHub: the check fails as a misconfiguration that names the setting", async () => {
    const github = githubAt("https://ghe.example.test", "https://ghe.example.test/api/v3", 2000, toMetadata());
    const failure = await github.check({ accessToken: "gho_x", refreshable: false }).catch((err: unknown) => err);
    expect(failure).toMatchObject({ kind: "misconfigured" });
    expect((failure as Error).message).toMatch(/cloud metadata address.*GITHUB_URL \/ GITHUB_API_URL/);
  });

  it("GitHub and OIDC: a check ends at the client's deadline while the answer still trickles in", async () => {
    const github = githubAt(a.url, `${a.url}/drip-api`, 300, client({ timeoutMs: 300 }));
    await expect(github.check({ accessToken: "gho_x", refreshable: false })).rejects.toMatchObject({ kind: "unavailable" });
    const oidc = new OidcProvider({
      kind: "oidc",
      displayName: "x",
      issuer: a.url,
      clientId: "c",
      clientSecret: "s",
      scopes: "openid",
      timeoutMs: 300,
      fetch: client({ timeoutMs: 300 }),
    });
    const failure = await oidc.check({ accessToken: "at_x", refreshable: false }).catch((err: unknown) => err);
    expect(failure).toMatchObject({ kind: "unavailable" });
    expect((failure as Error).message).toMatch(/did not answer in time/);
    expect(a.paths).toContain("/drip");
  });

  it("OIDC: discovery says why the issuer cannot be reached", async () => {
    const oidc = new OidcProvider({
      kind: "oidc",
      displayName: "x",
      issuer: "https://idp.example.test",
      clientId: "c",
      clientSecret: "s",
      scopes: "openid",
      timeoutMs: 2000,
      fetch: toMetadata(),
    });
    await expect(oidc.prepare()).rejects.toThrow(/cloud metadata address/);
  });
});
