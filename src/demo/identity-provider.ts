// The demo identity provider: a real OpenID Connect issuer (oidc-provider) whose login page
// accepts any user name without a password. Demo mode mounts it under PUBLIC_URL/demo-idp; the
// tests also run it standalone as "some OIDC issuer" (introspection, revocation, refresh tokens).
import http from "node:http";
import type { AddressInfo } from "node:net";
import { generateKeyPair, exportJWK, type JWK } from "jose";
import Provider, { type Adapter, type AdapterPayload, type Configuration } from "oidc-provider";
import { html } from "../views/html.ts";
import { page } from "../views/layout.ts";

export interface DemoClient {
  readonly client_id: string;
  readonly client_secret: string;
  readonly redirect_uris: readonly string[];
}

export interface DemoIdentityProviderOptions {
  /** Full issuer URL, including the mount path when mounted (e.g. http://localhost:3000/demo-idp). */
  readonly issuer: string;
  readonly clients: readonly DemoClient[];
  /** Lifetime of upstream access tokens (short values let tests exercise expiry and refresh). */
  readonly accessTokenTtlSeconds?: number;
  /** Keys for the IdP's own cookies. */
  readonly cookieKeys: readonly string[];
  /**
   * Claims of an account beyond the defaults (e.g. `groups`, or `email_verified: false`), read on
   * every ID token and userinfo answer: tests change them to move a user in or out of a group.
   */
  readonly accountClaims?: (accountId: string) => Readonly<Record<string, unknown>> | undefined;
}

export interface DemoIdentityProvider {
  readonly provider: Provider;
  readonly issuer: string;
  /** Path prefix the IdP is served under ("" when standalone). */
  readonly mountPath: string;
  /** Handles a request whose URL is already relative to the mount path. */
  handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void>;
  /** Destroys every access and refresh token of an account ("the user revoked the app"). */
  revokeSubject(accountId: string): Promise<number>;
  /** Registers one more client (stored like a dynamically registered one). */
  addClient(client: DemoClient): Promise<void>;
  /** When on, every request answers 503 (an IdP outage). */
  setOutage(on: boolean): void;
}

/** A memory adapter that can also list tokens by account, for revokeSubject. */
class MemoryAdapter implements Adapter {
  static readonly stores = new WeakMap<object, Map<string, Map<string, { payload: AdapterPayload; expiresAt: number | null }>>>();

  constructor(
    private readonly name: string,
    private readonly store: Map<string, Map<string, { payload: AdapterPayload; expiresAt: number | null }>>,
  ) {}

  private get model() {
    let m = this.store.get(this.name);
    if (!m) {
      m = new Map();
      this.store.set(this.name, m);
    }
    return m;
  }

  async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
    this.model.set(id, { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : null });
  }
  async find(id: string): Promise<AdapterPayload | undefined> {
    const entry = this.model.get(id);
    if (!entry) return undefined;
    if (entry.expiresAt !== null && entry.expiresAt <= Date.now()) {
      this.model.delete(id);
      return undefined;
    }
    return entry.payload;
  }
  async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
    for (const [id, e] of this.model) if (e.payload.userCode === userCode) return this.find(id);
    return undefined;
  }
  async findByUid(uid: string): Promise<AdapterPayload | undefined> {
    for (const [id, e] of this.model) if (e.payload.uid === uid) return this.find(id);
    return undefined;
  }
  async consume(id: string): Promise<void> {
    const entry = this.model.get(id);
    if (entry) entry.payload = { ...entry.payload, consumed: Math.floor(Date.now() / 1000) };
  }
  async destroy(id: string): Promise<void> {
    this.model.delete(id);
  }
  async revokeByGrantId(grantId: string): Promise<void> {
    for (const [id, e] of this.model) if (e.payload.grantId === grantId) this.model.delete(id);
  }
}

function clientMetadata(c: DemoClient) {
  return {
    client_id: c.client_id,
    client_secret: c.client_secret,
    redirect_uris: [...c.redirect_uris],
    grant_types: ["authorization_code", "refresh_token", "client_credentials"],
    response_types: ["code"] as ["code"],
    token_endpoint_auth_method: "client_secret_basic" as const,
  };
}

function loginPage(uid: string, mountPath: string, error?: string): string {
  return page(
    "Sign in — demo identity provider",
    html`<h1>Demo identity provider</h1>
<p><span class="badge">DEMO</span> Type any user name, no password. Every name is a different user.</p>
${error ? html`<p role="alert" class="error-text">${error}</p>` : ""}
<form method="post" action="${mountPath}/interaction/${uid}/login">
<p><label for="username">User name</label><br>
<input id="username" name="username" autocomplete="username" autofocus required maxlength="64" pattern="[A-Za-z0-9._@-]+" style="width:100%;padding:10px;font:inherit;border-radius:8px;border:1px solid var(--border);background:transparent;color:inherit"></p>
<div class="actions"><button class="primary" type="submit">Sign in</button></div>
</form>`,
  );
}

async function readUsername(req: http.IncomingMessage): Promise<string> {
  let body = "";
  for await (const chunk of req as AsyncIterable<Buffer>) {
    body += chunk.toString();
    if (body.length > 4096) break;
  }
  return (new URLSearchParams(body).get("username") ?? "").trim().toLowerCase();
}

// One signing key per process, made on first use: an RSA key takes 100-400 ms to generate, and a
// process that starts several demo providers (the test suite starts hundreds) need not pay each
// time. Nothing outside the process ever held it.
let signingKey: Promise<JWK> | undefined;

function demoSigningKey(): Promise<JWK> {
  signingKey ??= generateKeyPair("RS256", { extractable: true }).then(async ({ privateKey }) => ({
    ...(await exportJWK(privateKey)),
    kid: "demo-1",
    use: "sig",
    alg: "RS256",
  }));
  return signingKey;
}

/** The demo provider's records, per model (AccessToken, Grant…), in memory. */
type DemoStore = Map<string, Map<string, { payload: AdapterPayload; expiresAt: number | null }>>;

/** oidc-provider's configuration: in-memory records, consent granted by the broker's page, opaque tokens. */
function providerConfiguration(options: DemoIdentityProviderOptions, mountPath: string, jwk: JWK, store: DemoStore): Configuration {
  return {
    adapter: (name: string) => new MemoryAdapter(name, store),
    clients: options.clients.map(clientMetadata),
    jwks: { keys: [jwk] },
    cookies: { keys: [...options.cookieKeys] },
    findAccount: async (_ctx, id) => ({
      accountId: id,
      claims: async () => ({
        sub: id,
        email: `${id}@demo.invalid`,
        email_verified: true,
        name: id,
        preferred_username: id,
        groups: [],
        ...options.accountClaims?.(id),
      }),
    }),
    // `groups` as Okta and Authentik release it: a scope of its own, in the ID token and userinfo.
    claims: { openid: ["sub"], email: ["email", "email_verified"], profile: ["name", "preferred_username"], groups: ["groups"] },
    scopes: ["openid", "offline_access", "email", "profile", "groups"],
    features: {
      devInteractions: { enabled: false },
      // A client may introspect and revoke only its own tokens.
      introspection: { enabled: true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
      revocation: { enabled: true, allowedPolicy: async (_ctx, client, token) => token.clientId === client.clientId },
      clientCredentials: { enabled: true },
    },
    pkce: { required: () => true },
    ttl: {
      AccessToken: options.accessTokenTtlSeconds ?? 3600,
      AuthorizationCode: 60,
      IdToken: 3600,
      Interaction: 600,
      Session: 86400,
      Grant: 86400 * 30,
      RefreshToken: 86400 * 30,
      ClientCredentials: 600,
    },
    // Opaque tokens (no resource indicators), a refresh token whenever the client may refresh.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    interactions: { url: (_ctx, interaction) => `${mountPath}/interaction/${interaction.uid}` },
    renderError: async (ctx, out) => {
      ctx.type = "html";
      ctx.body = page("Demo identity provider error", html`<h1>Sign-in error</h1><p>${String(out.error)}: ${String(out.error_description ?? "")}</p>`);
    },
  };
}

async function grantEverything(provider: Provider, details: Awaited<ReturnType<Provider["interactionDetails"]>>): Promise<string> {
  const grant = details.grantId
    ? ((await provider.Grant.find(details.grantId)) ??
      new provider.Grant({ accountId: details.session?.accountId ?? "", clientId: String(details.params.client_id) }))
    : new provider.Grant({ accountId: details.session?.accountId ?? "", clientId: String(details.params.client_id) });
  const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> };
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(" "));
  return grant.save();
}

/** An interaction: consent granted at once, the login form shown, or its user name taken. */
async function handleInteraction(provider: Provider, mountPath: string, login: boolean, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  try {
    const details = await provider.interactionDetails(req, res);
    if (details.prompt.name === "consent") {
      // The broker shows its own consent page; the demo IdP grants what is asked.
      await provider.interactionFinished(req, res, { consent: { grantId: await grantEverything(provider, details) } }, { mergeWithLastSubmission: true });
      return;
    }
    if (login && req.method === "POST") {
      const username = await readUsername(req);
      if (!/^[a-z0-9._@-]{1,64}$/.test(username)) {
        res
          .writeHead(400, { "content-type": "text/html; charset=utf-8" })
          .end(loginPage(details.uid, mountPath, "Use letters, digits, dots, dashes, underscores or @."));
        return;
      }
      await provider.interactionFinished(req, res, { login: { accountId: username } }, { mergeWithLastSubmission: false });
      return;
    }
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" }).end(loginPage(details.uid, mountPath));
  } catch {
    res
      .writeHead(400, { "content-type": "text/html; charset=utf-8" })
      .end(page("Sign-in expired", html`<h1>Sign-in expired</h1><p>Start the sign-in again from your application.</p>`));
  }
}

/** Every token, code and grant of the account removed: how many. */
function revokeFromStore(store: DemoStore, accountId: string): number {
  let removed = 0;
  for (const model of ["AccessToken", "RefreshToken", "AuthorizationCode", "Grant"]) {
    const m = store.get(model);
    if (!m) continue;
    for (const [id, e] of m) {
      if (e.payload.accountId === accountId) {
        m.delete(id);
        removed++;
      }
    }
  }
  return removed;
}

const INTERACTION = /^\/interaction\/([A-Za-z0-9_-]+)(\/login)?$/;

export async function createDemoIdentityProvider(options: DemoIdentityProviderOptions): Promise<DemoIdentityProvider> {
  const mountPath = new URL(options.issuer).pathname.replace(/\/+$/, "");
  const jwk = { ...(await demoSigningKey()) };
  const store: DemoStore = new Map();
  const provider = new Provider(options.issuer, providerConfiguration(options, mountPath, jwk, store));
  provider.proxy = true;
  let outage = false;
  const callback = provider.callback();

  async function handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    if (outage) {
      res.writeHead(503, { "content-type": "application/json", "retry-after": "5" }).end('{"error":"temporarily_unavailable"}');
      return;
    }
    const match = INTERACTION.exec(path);
    if (match) return handleInteraction(provider, mountPath, match[2] !== undefined, req, res);
    await callback(req, res);
  }

  return {
    provider,
    issuer: options.issuer,
    mountPath,
    handle,
    async revokeSubject(accountId: string) {
      return revokeFromStore(store, accountId);
    },
    async addClient(client: DemoClient) {
      await new MemoryAdapter("Client", store).upsert(client.client_id, clientMetadata(client) as unknown as AdapterPayload);
    },
    setOutage(on: boolean) {
      outage = on;
    },
  };
}

export interface StandaloneDemoIdentityProvider extends DemoIdentityProvider {
  readonly url: string;
  close(): Promise<void>;
}

/** Runs the demo IdP on its own port on 127.0.0.1 (tests: "an OIDC issuer"). */
export async function startDemoIdentityProvider(
  options: Omit<DemoIdentityProviderOptions, "issuer"> & { port?: number },
): Promise<StandaloneDemoIdentityProvider> {
  let idp: DemoIdentityProvider | undefined;
  const server = http.createServer((req, res) => {
    if (!idp) return void res.writeHead(503).end();
    idp.handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  idp = await createDemoIdentityProvider({ ...options, issuer: url });
  return {
    ...idp,
    url,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
