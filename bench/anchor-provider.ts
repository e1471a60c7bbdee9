// The benchmark's anchor: node-oidc-provider (a mature, fast OAuth server) on an SQLite adapter at
// its fastest sensible setting — the `libsql` package's synchronous API (better-sqlite3's, without
// its download of a prebuilt binary), statements prepared once, WAL with `synchronous=NORMAL` (no
// fsync per commit; the broker answers only once its WAL is flushed, as durable as FULL), the broker's busy_timeout — serving the same requests:
// a public client, PKCE, a resource indicator, refresh tokens rotated on every use, opaque access
// tokens, no ID token. Its own process, so its CPU time is its own. Prints `ANCHOR_URL <url> <synchronous level>`.
//
// POST /bench/codes?n=N mints N authorization codes (with their PKCE verifiers) straight through the
// provider's models, as a finished login would leave them: the benchmark measures the token
// endpoint, not the login pages.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { randomBytes } from "node:crypto";
import Database from "libsql";
import Provider, { type Adapter, type AdapterPayload } from "oidc-provider";
import { SQLITE_CONNECTION_PRAGMAS } from "../src/store/sqlite-connections.ts";
import { s256Challenge } from "../src/grants/pkce.ts";

const file = process.argv[2];
if (!file) throw new Error("usage: anchor-provider.ts <sqlite file>");
const ANCHOR_SYNCHRONOUS = process.env.BENCH_ANCHOR_SYNCHRONOUS === "FULL" ? "FULL" : "NORMAL";
const ANCHOR_CLIENT = { client_id: "bench-client", redirect_uri: "http://127.0.0.1:7777/callback" };

const db = new Database(file);
db.prepare(SQLITE_CONNECTION_PRAGMAS.withRow).get();
db.prepare("PRAGMA journal_mode = WAL").get();
// The anchor's durability: NORMAL unless BENCH_ANCHOR_SYNCHRONOUS says otherwise (FULL: the broker's).
db.exec(`PRAGMA synchronous = ${ANCHOR_SYNCHRONOUS}`);
db.exec(`CREATE TABLE IF NOT EXISTS oidc_model (
  model TEXT NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, grant_id TEXT, user_code TEXT, uid TEXT,
  expires_at INTEGER, consumed_at INTEGER, PRIMARY KEY (model, id))`);
db.exec("CREATE INDEX IF NOT EXISTS oidc_model_grant ON oidc_model (grant_id)");

const upsert = db.prepare(
  `INSERT INTO oidc_model (model, id, payload, grant_id, user_code, uid, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?)
   ON CONFLICT (model, id) DO UPDATE SET payload = excluded.payload, grant_id = excluded.grant_id, user_code = excluded.user_code,
   uid = excluded.uid, expires_at = excluded.expires_at`,
);
const findBy = {
  id: db.prepare("SELECT payload, expires_at, consumed_at FROM oidc_model WHERE model = ? AND id = ?"),
  userCode: db.prepare("SELECT payload, expires_at, consumed_at FROM oidc_model WHERE model = ? AND user_code = ?"),
  uid: db.prepare("SELECT payload, expires_at, consumed_at FROM oidc_model WHERE model = ? AND uid = ?"),
};
const consume = db.prepare("UPDATE oidc_model SET consumed_at = ? WHERE model = ? AND id = ?");
const destroy = db.prepare("DELETE FROM oidc_model WHERE model = ? AND id = ?");
const revokeByGrant = db.prepare("DELETE FROM oidc_model WHERE grant_id = ?");

interface StoredRow {
  payload: string;
  expires_at: number | null;
  consumed_at: number | null;
}

function payloadOf(row: unknown): AdapterPayload | undefined {
  const r = row as StoredRow | undefined;
  if (!r || (r.expires_at !== null && r.expires_at <= Date.now())) return undefined;
  const payload = JSON.parse(r.payload) as AdapterPayload;
  return r.consumed_at === null ? payload : { ...payload, consumed: r.consumed_at };
}

class SqliteAdapter implements Adapter {
  constructor(private readonly model: string) {}
  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    const expiresAt = expiresIn ? Date.now() + expiresIn * 1000 : null;
    upsert.run(this.model, id, JSON.stringify(payload), payload.grantId ?? null, payload.userCode ?? null, payload.uid ?? null, expiresAt);
  }
  async find(id: string) {
    return payloadOf(findBy.id.get(this.model, id));
  }
  async findByUserCode(userCode: string) {
    return payloadOf(findBy.userCode.get(this.model, userCode));
  }
  async findByUid(uid: string) {
    return payloadOf(findBy.uid.get(this.model, uid));
  }
  async consume(id: string): Promise<void> {
    consume.run(Math.floor(Date.now() / 1000), this.model, id);
  }
  async destroy(id: string): Promise<void> {
    destroy.run(this.model, id);
  }
  async revokeByGrantId(grantId: string): Promise<void> {
    revokeByGrant.run(grantId);
  }
}

const server = http.createServer();
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
const resource = `${issuer}/mcp`;

const provider = new Provider(issuer, {
  adapter: SqliteAdapter,
  clients: [
    {
      client_id: ANCHOR_CLIENT.client_id,
      token_endpoint_auth_method: "none",
      redirect_uris: [ANCHOR_CLIENT.redirect_uri],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
    },
  ],
  cookies: { keys: [randomBytes(32).toString("hex")] },
  findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  // As the broker: a refresh token for every client registered for the grant, rotated on each use.
  issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
  rotateRefreshToken: () => true,
  features: {
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({ scope: "mcp", audience: resource, accessTokenFormat: "opaque" }),
    },
  },
});

/** Authorization codes as a completed login leaves them: grant, code, PKCE challenge. */
async function mintCodes(n: number): Promise<Array<{ code: string; verifier: string }>> {
  const client = await provider.Client.find(ANCHOR_CLIENT.client_id);
  const out: Array<{ code: string; verifier: string }> = [];
  for (let i = 0; i < n; i++) {
    const accountId = `user-${randomBytes(6).toString("hex")}`;
    const grant = new provider.Grant({ accountId, clientId: ANCHOR_CLIENT.client_id });
    grant.addResourceScope(resource, "mcp");
    const grantId = await grant.save();
    const verifier = randomBytes(32).toString("base64url");
    const code = new provider.AuthorizationCode({
      accountId,
      grantId,
      client,
      redirectUri: ANCHOR_CLIENT.redirect_uri,
      scope: "mcp",
      resource,
      codeChallenge: s256Challenge(verifier),
      codeChallengeMethod: "S256",
      authTime: Math.floor(Date.now() / 1000),
    } as ConstructorParameters<typeof provider.AuthorizationCode>[0]);
    out.push({ code: await code.save(), verifier });
  }
  return out;
}

const callback = provider.callback();
server.on("request", (req, res) => {
  const url = new URL(req.url ?? "/", issuer);
  if (req.method === "POST" && url.pathname === "/bench/codes") {
    mintCodes(Number(url.searchParams.get("n") ?? 1)).then(
      (codes) => {
        res.setHeader("content-type", "application/json");
        res.end(JSON.stringify({ resource, client: ANCHOR_CLIENT, codes }));
      },
      (err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      },
    );
    return;
  }
  void callback(req, res);
});

process.stdout.write(`ANCHOR_URL ${issuer} ${ANCHOR_SYNCHRONOUS}\n`);
process.on("SIGTERM", () => {
  server.close();
  db.close();
  process.exit(0);
});
