// A seeded fuzz run against every endpoint, on SQLite and PostgreSQL: 10,000
// requests built from valid requests with parameters dropped, duplicated, swapped and filled with
// hostile values (control characters, invalid UTF-8, long strings, wrong types). None may get a 5xx,
// and the broker must still be up afterwards. The seed is fixed, so a failure replays exactly; a
// failure report names the request.
import { afterAll, beforeAll, describe, expect, it } from "@jest/globals";
import { type Dispatcher, Pool, errors as undiciErrors } from "undici";
import { startBroker, type TestBroker } from "../support/start-broker.ts";
import { databaseTargets } from "../support/database-targets.ts";
import { obtainTokens } from "../support/oauth-flow.ts";
import { basicAuth, registerClientSet, type TestClient } from "../support/oauth-client.ts";

const SEED = 0x5eed17;
const REQUESTS = 10_000;
const CONCURRENCY = 16;

/** mulberry32: small, fast, and the same sequence on every machine. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface FuzzRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

interface Known {
  readonly url: string;
  readonly pub: TestClient;
  readonly basic: TestClient;
  readonly post: TestClient;
  readonly machine: TestClient;
  readonly accessToken: string;
  readonly refreshToken: string;
}

function generator(seed: number, k: Known): () => FuzzRequest {
  const random = prng(seed);
  const int = (n: number) => Math.floor(random() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)]!;
  const chance = (p: number) => random() < p;
  let ipCounter = 0;
  const ip = () => `10.77.${(++ipCounter >> 8) & 255}.${ipCounter & 255}`;

  const hostile = [
    "",
    " ",
    "\u0000",
    "a\u0000b",
    "\r\nX-Injected: 1",
    "\t",
    "\u007f",
    "\u202e\u0000",
    "😀",
    "é",
    "\ud800",
    "%00",
    "%",
    "%zz",
    "..%2f..%2f",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a log4j-style payload, literally
    "${jndi:ldap://x}",
    "null",
    "[]",
    "{}",
    "0",
    "-1",
    "1e309",
    "javascript:alert(1)",
    "http://evil.example/cb",
    "https://evil.example/cb#frag",
    "mab_at_",
    "mab_rt_x",
    "mab_ac_x",
    "mab_c_x",
    "S256",
    "plain",
    "code",
    "mcp",
    "mcp admin",
    "offline_access",
  ];
  const word = () => {
    const roll = random();
    if (roll < 0.5) return pick(hostile);
    if (roll < 0.6) return "x".repeat(pick([100, 1000, 5000, 70_000]));
    if (roll < 0.8) return Array.from({ length: int(40) }, () => String.fromCharCode(int(0x250))).join("");
    return pick([
      k.pub.client_id,
      k.basic.client_id,
      k.machine.client_id,
      k.accessToken,
      k.refreshToken,
      k.pub.redirect_uri,
      `${k.url}/mcp`,
      "authorization_code",
      "refresh_token",
      "client_credentials",
    ]);
  };
  /**
   * Percent-encodes the UTF-8 bytes (a lone surrogate becomes U+FFFD, as a browser sends it). Made
   * well-formed first rather than caught: a thrown URIError costs Jest's 100-frame stack each time.
   */
  const pct = (v: string) => encodeURIComponent(v.toWellFormed());
  /** pct, sometimes followed by an invalid UTF-8 or broken escape. */
  const enc = (v: string) => (chance(0.1) ? `${pct(v)}%${pick(["ff", "c0%ae", "e0%a4", "zz", ""])}` : pct(v));
  const query = (names: readonly string[]) => {
    const params: string[] = [];
    for (const name of names) {
      if (chance(0.15)) continue;
      params.push(`${chance(0.03) ? enc(word()) : name}=${enc(word())}`);
      if (chance(0.05)) params.push(`${name}=${enc(word())}`);
    }
    return params.join("&");
  };
  const formTypes = [
    "application/x-www-form-urlencoded",
    "application/x-www-form-urlencoded; charset=utf-8",
    "application/json",
    "text/plain",
    "multipart/form-data; boundary=x",
    "",
  ];
  const auth = () =>
    pick([
      {},
      { authorization: basicAuth(k.basic.client_id, k.basic.client_secret!) },
      { authorization: basicAuth(k.machine.client_id, k.machine.client_secret!) },
      { authorization: `Basic ${Buffer.from(`${pct(word())}:${pct(word())}`).toString("base64")}` },
      { authorization: `Basic ${Buffer.from(word()).toString("base64")}` },
      { authorization: `Bearer ${pct(word())}` },
      { authorization: "Basic" },
    ]);
  const jsonValue = (depth = 0): unknown => {
    const roll = random();
    if (depth > 2 || roll < 0.5) return word();
    if (roll < 0.6) return int(1e6) - 5e5;
    if (roll < 0.7) return pick([null, true, false]);
    if (roll < 0.85) return Array.from({ length: int(4) }, () => jsonValue(depth + 1));
    return { [word().slice(0, 20)]: jsonValue(depth + 1) };
  };
  const form = () => ({ "content-type": pick(formTypes), ...auth(), "x-forwarded-for": ip() }) as Record<string, string>;

  const endpoints: Array<() => FuzzRequest> = [
    () => {
      const doc: Record<string, unknown> = { redirect_uris: [k.pub.redirect_uri], token_endpoint_auth_method: "none" };
      for (const field of [
        "redirect_uris",
        "token_endpoint_auth_method",
        "grant_types",
        "response_types",
        "scope",
        "client_name",
        "client_uri",
        "logo_uri",
        "software_id",
        "software_version",
        "__proto__",
      ]) {
        if (chance(0.3)) doc[field] = chance(0.5) ? jsonValue() : [word()];
      }
      const body = chance(0.1) ? word() : JSON.stringify(doc);
      return {
        method: "POST",
        path: "/register",
        headers: { "content-type": chance(0.9) ? "application/json" : pick(formTypes), "x-forwarded-for": ip() },
        body,
      };
    },
    () => ({
      method: pick(["GET", "GET", "POST"]),
      path: `/authorize?${query(["response_type", "client_id", "redirect_uri", "code_challenge", "code_challenge_method", "state", "scope", "resource"])}`,
      headers: {},
    }),
    () => ({
      method: "POST",
      path: "/token",
      headers: form(),
      body: query(["grant_type", "client_id", "client_secret", "code", "code_verifier", "redirect_uri", "refresh_token", "scope", "resource"]),
    }),
    () => ({ method: "POST", path: "/revoke", headers: form(), body: query(["token", "token_type_hint", "client_id", "client_secret"]) }),
    () => ({ method: "POST", path: "/introspect", headers: form(), body: query(["token", "token_type_hint", "client_id", "client_secret"]) }),
    () => ({ method: "GET", path: `/consent?${query(["transaction"])}`, headers: { cookie: `mab_session=${pct(word())}` } }),
    () => ({
      method: "POST",
      path: "/consent",
      headers: { "content-type": pick(formTypes), cookie: `mab_session=${pct(word())}` },
      body: query(["transaction", "csrf", "decision"]),
    }),
    () => ({ method: "GET", path: `/oauth/callback?${query(["code", "state", "error", "error_description", "iss"])}`, headers: {} }),
    () => ({
      method: pick(["GET", "POST", "POST", "DELETE", "PUT", "OPTIONS"]),
      path: pick(["/mcp", "/mcp", `/mcp/${enc(word())}`, `/mcp?${query(["access_token", "x"])}`]),
      headers: {
        authorization: chance(0.7) ? `Bearer ${k.accessToken}` : `Bearer ${pct(word())}`,
        "content-type": pick(["application/json", "text/plain", "application/x-www-form-urlencoded"]),
        accept: pick(["application/json, text/event-stream", "text/html", "*/*"]),
        ...(chance(0.3) ? { "mcp-session-id": pct(word()).slice(0, 200) } : {}),
        ...(chance(0.3) ? { "mcp-protocol-version": pct(word()).slice(0, 50) } : {}),
      },
      body: chance(0.5)
        ? JSON.stringify({ jsonrpc: "2.0", id: int(100), method: pick(["initialize", "tools/list", "tools/call", word()]), params: jsonValue() })
        : word(),
    }),
    () => ({
      method: pick(["GET", "POST", "DELETE", "PATCH"]),
      path: pick([
        "/.well-known/oauth-authorization-server",
        "/.well-known/oauth-protected-resource/mcp",
        "/healthz",
        "/readyz",
        `/${enc(word())}`,
        `/token/${enc(word())}`,
      ]),
      headers: {},
    }),
  ];
  return () => {
    const request = pick(endpoints)();
    // GET, HEAD and OPTIONS carry no body through fetch.
    return ["GET", "HEAD", "OPTIONS"].includes(request.method) ? { ...request, body: undefined } : request;
  };
}

describe.each(databaseTargets("the fuzz run").map((target) => [target.name, target] as const))("fuzzing on %s", (_name, target) => {
  let t: TestBroker;
  let cleanup: () => Promise<void>;
  let known: Known;
  beforeAll(async () => {
    const database = await target.setup();
    cleanup = database.cleanup;
    t = await startBroker({ TRUST_PROXY: "true", DATABASE_URL: database.url });
    const db = t.broker.database.db;
    const clients = await registerClientSet(t.url, db);
    const { tokens } = await obtainTokens(t.url, { client: clients.pub });
    known = { url: t.url, ...clients, accessToken: tokens.access_token, refreshToken: tokens.refresh_token };
  }, 60_000);
  afterAll(async () => {
    await t.stop();
    await cleanup();
  });

  it(`${REQUESTS} seeded requests: no 5xx, and the broker is still up`, async () => {
    const next = generator(SEED, known);
    const requests = Array.from({ length: REQUESTS }, next);
    const failures: string[] = [];
    const statuses = new Map<number, number>();
    let index = 0;
    const worker = async () => {
      while (index < requests.length) {
        const i = index++;
        const r = requests[i]!;
        let status: number;
        try {
          // undici's own request (what fetch is built on) costs the client a fraction of fetch's CPU,
          // and client and broker share this process.
          const res = await pool.request({
            method: r.method as Dispatcher.HttpMethod,
            path: r.path,
            headers: r.headers,
            ...(r.body !== undefined ? { body: r.body } : {}),
          });
          await res.body.dump();
          status = res.statusCode;
        } catch (err) {
          // The client refusing to send something (an invalid header value) is not the broker's answer.
          if (err instanceof undiciErrors.InvalidArgumentError) continue;
          failures.push(`#${i} ${r.method} ${r.path.slice(0, 120)}: ${(err as Error).message} ${String((err as { cause?: unknown }).cause ?? "")}`);
          continue;
        }
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        if (status >= 500)
          failures.push(`#${i} ${r.method} ${r.path.slice(0, 120)} ${JSON.stringify(r.headers).slice(0, 200)} ${(r.body ?? "").slice(0, 200)} → ${status}`);
      }
    };
    const pool = new Pool(t.url, { connections: CONCURRENCY });
    try {
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    } finally {
      await pool.close();
    }
    expect(failures.slice(0, 10)).toEqual([]);
    // The run really exercised the endpoints: nearly every request was sent (the client refuses a
    // few header values itself), with successes and refusals of several kinds.
    const answered = [...statuses.values()].reduce((a, b) => a + b, 0);
    process.stdout.write(`[fuzz] ${answered} of ${REQUESTS} requests answered: ${JSON.stringify(Object.fromEntries(statuses))}\n`);
    expect(answered).toBeGreaterThan(REQUESTS * 0.95);
    expect([...statuses.keys()].filter((s) => s >= 200 && s < 300).length).toBeGreaterThan(0);
    expect([...statuses.keys()].filter((s) => s >= 400 && s < 500).length).toBeGreaterThan(3);
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
  }, 180_000);
});
