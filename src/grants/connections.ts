// Connected accounts: each user's own account at a service of the configuration's `connections`
// (GitHub, Google, an OIDC issuer, a plain OAuth 2 provider), whose token reaches the MCP servers
// that name the connection. Tokens are stored encrypted like upstream tokens; they are refreshed
// before they expire, once per connection whatever the number of requests (single-flight in this
// process, a lease column across instances), and re-checked at the service on the schedule of the
// login's re-check. A connection the service refused is gone: the servers that need it say so
// (gateway/connection-gate.ts) until the user connects again.
import { randomUUID } from "node:crypto";
import { connectionByName, serverByResource } from "../config/catalogue.ts";
import type { ConnectionConfig } from "../config/connections.ts";
import { createConnectionProvider } from "../upstream/create.ts";
import { UpstreamError, type UpstreamIdentity, type UpstreamProvider, type UpstreamTokens } from "../upstream/provider.ts";
import { SingleFlight } from "../lib/single-flight.ts";
import { dateOf } from "../lib/clock.ts";
import { firstLine } from "../lib/error-text.ts";
import type { GrantsContext } from "./context.ts";
import type { GrantLifecycle } from "./lifecycle.ts";
import { audit } from "./audit.ts";
import { UpstreamUnavailable } from "./errors.ts";
import type { ConnectionRow } from "../store/db-types.ts";

/** A token this close to its expiry is refreshed before it is handed out. */
export const REFRESH_AHEAD_MS = 5 * 60_000;

/** What a server that needs a connection gets for a user. */
export type ConnectionState =
  /** The user's current token; `validUntil` (epoch ms): when it must be asked for again. */
  | { readonly status: "ok"; readonly token: string; readonly validUntil: number }
  /** Not connected, or the service no longer honours it: the user must connect (again). */
  | { readonly status: "missing"; readonly reason: "not_connected" | "revoked" };

/** A connection as /account lists it. */
export interface ConnectionView {
  readonly name: string;
  readonly title: string;
  readonly connected: boolean;
  readonly account: string | null;
  readonly scope: string | null;
  readonly connectedAt: Date | null;
  readonly lastUsedAt: Date | null;
  /** Set when the service refused it: the user connects again. */
  readonly broken: boolean;
}

export class Connections {
  private readonly providers = new WeakMap<ConnectionConfig, UpstreamProvider>();
  private readonly loads = new SingleFlight<ConnectionState>();
  readonly stats = { refreshes: 0, checks: 0 };

  constructor(
    private readonly ctx: GrantsContext,
    private readonly lifecycle: GrantLifecycle,
    /** The tokens of a login (upstream session): a connection to the login's own service uses them. */
    private readonly loginTokens: (sessionId: string) => Promise<UpstreamTokens | null> = async () => null,
  ) {}

  /**
   * Whether the login's token serves as this connection: the users signed in at the same service
   * (GitHub at the same host, Google, the same OIDC issuer) with scopes that include the
   * connection's. Then nobody is asked to connect it again (a server in front of GitHub behind a
   * GitHub login gets that login's token, as FORWARD_UPSTREAM_TOKEN gave it).
   */
  servedByLogin(config: ConnectionConfig, loginScope: string | null | undefined): boolean {
    const login = this.ctx.config.upstream;
    const { provider } = config;
    const same =
      (provider.kind === "github" && login.provider === "github" && login.githubUrl.replace(/\/+$/, "") === provider.githubUrl) ||
      (provider.kind === "google" && login.provider === "google") ||
      (provider.kind === "oidc" && login.provider === "oidc" && login.issuer === provider.issuer);
    if (!same) return false;
    const granted = new Set((loginScope ?? login.scopes ?? "").split(/[ ,]+/).filter(Boolean));
    return config.scopes.every((s) => granted.has(s));
  }

  /** The configured connection `name`, as the catalogue says now (a reload may change it). */
  config(name: string): ConnectionConfig | undefined {
    return connectionByName(this.ctx.config.catalogue, name);
  }

  /** The service's provider for a connection (one per configuration of it). */
  provider(config: ConnectionConfig): UpstreamProvider {
    let provider = this.providers.get(config);
    if (!provider) {
      provider = createConnectionProvider(config, this.ctx.config.upstream.timeoutMs);
      this.providers.set(config, provider);
    }
    return provider;
  }

  /** Who signed in for an upstream session (a transaction waiting at its connect step names it). */
  async sessionOwner(sessionId: string): Promise<{ readonly subject: string; readonly login: string | null } | null> {
    const session = await this.ctx.db.upstreamSession.findUnique({ where: { id: sessionId }, select: { subject: true, login: true, status: true } });
    return session?.status === "active" ? { subject: session.subject, login: session.login } : null;
  }

  /**
   * The connections the server of `resource` needs that `subject` has no working one of;
   * `loginScope`: the scopes of the user's login token (its service may be the connection's).
   */
  async missingFor(subject: string, resource: string, loginScope: string | null | undefined): Promise<ConnectionConfig[]> {
    const server = serverByResource(this.ctx.config.catalogue, resource);
    const config = server?.connection && this.config(server.connection.name);
    if (!config || this.servedByLogin(config, loginScope)) return [];
    const row = await this.ctx.db.connection.findUnique({ where: { subject_name: { subject, name: config.name } } });
    return row?.status === "active" ? [] : [config];
  }

  /** Stores (or replaces) the user's account at a service, after its code exchange. */
  async link(subject: string, config: ConnectionConfig, tokens: UpstreamTokens, account: UpstreamIdentity, ip: string | undefined): Promise<void> {
    const now = dateOf(this.ctx.clock);
    const sealed = {
      provider: config.provider.kind,
      accountSubject: account.subject,
      accountLogin: account.login || null,
      accessTokenEnc: await this.ctx.secrets.encrypt(tokens.accessToken),
      refreshTokenEnc: await this.ctx.secrets.encryptOptional(tokens.refreshToken),
      scope: tokens.scope ?? null,
      accessExpiresAt: tokens.accessExpiresAt ?? null,
      status: "active",
      revokedReason: null,
      refreshingUntil: null,
      lastCheckedAt: now,
    };
    await this.ctx.db.connection.upsert({
      where: { subject_name: { subject, name: config.name } },
      create: { id: randomUUID(), subject, name: config.name, ...sealed },
      update: sealed,
    });
    await audit(this.ctx.db, { type: "connection.linked", subject, ip, detail: { connection: config.name, account: account.login || account.subject } });
  }

  /**
   * The user's token for connection `name`, refreshed or re-checked first when due. Concurrent
   * callers share one load. Throws UpstreamUnavailable when the service cannot be asked and the
   * current token cannot be trusted without it.
   */
  tokenFor(subject: string, name: string, loginSessionId?: string | null): Promise<ConnectionState> {
    return this.loads.run(`${subject}\u0000${name}`, async () => (await this.fromLogin(name, loginSessionId)) ?? this.load(subject, name));
  }

  /** The login's token, when it serves as this connection (servedByLogin); undefined otherwise. */
  private async fromLogin(name: string, loginSessionId: string | null | undefined): Promise<ConnectionState | undefined> {
    const config = this.config(name);
    if (!config || !loginSessionId) return undefined;
    const tokens = await this.loginTokens(loginSessionId);
    if (!tokens || !this.servedByLogin(config, tokens.scope)) return undefined;
    // The login is re-checked (and refreshed) by the validation that asks for this.
    return { status: "ok", token: tokens.accessToken, validUntil: Number.POSITIVE_INFINITY };
  }

  private async load(subject: string, name: string): Promise<ConnectionState> {
    const config = this.config(name);
    const row = await this.ctx.db.connection.findUnique({ where: { subject_name: { subject, name } } });
    if (!config || !row) return { status: "missing", reason: "not_connected" };
    if (row.status !== "active") return { status: "missing", reason: "revoked" };
    const now = this.ctx.clock.now();
    const expiresAt = row.accessExpiresAt?.getTime();
    if (expiresAt !== undefined && expiresAt - now < REFRESH_AHEAD_MS) return this.refresh(config, row, now);
    const recheckMs = this.ctx.config.upstreamRecheckSeconds * 1000;
    if (now - row.lastCheckedAt.getTime() >= recheckMs) {
      const checked = await this.check(config, row, now);
      if (checked) return checked;
    }
    await this.ctx.db.connection.update({ where: { id: row.id }, data: { lastUsedAt: dateOf(this.ctx.clock) } });
    return this.ok(await this.ctx.secrets.decrypt(row.accessTokenEnc), row.lastCheckedAt.getTime() + recheckMs, expiresAt);
  }

  /** Asks the service whether the token still holds; a state when that decided (gone, refreshed), undefined when it holds. */
  private async check(config: ConnectionConfig, row: ConnectionRow, now: number): Promise<ConnectionState | undefined> {
    this.stats.checks++;
    const accessToken = await this.ctx.secrets.decrypt(row.accessTokenEnc);
    const answer = await this.callService(config, () =>
      this.provider(config).check({ accessToken, accessExpiresAt: row.accessExpiresAt ?? undefined, refreshable: row.refreshTokenEnc !== null }),
    );
    if (answer.status === "invalid") return this.gone(row, "connection_invalid", answer.reason);
    if (answer.status === "expired") return this.refresh(config, row, now);
    await this.ctx.db.connection.update({ where: { id: row.id }, data: { lastCheckedAt: dateOf(this.ctx.clock), lastUsedAt: dateOf(this.ctx.clock) } });
    return this.ok(accessToken, now + this.ctx.config.upstreamRecheckSeconds * 1000, row.accessExpiresAt?.getTime());
  }

  /**
   * Refreshes a token about to expire. One instance at a time holds the lease; another meanwhile
   * keeps handing out the current token while it is still valid.
   */
  private async refresh(config: ConnectionConfig, row: ConnectionRow, now: number): Promise<ConnectionState> {
    const expiresAt = row.accessExpiresAt?.getTime();
    const provider = this.provider(config);
    const tokens = await this.tokensOf(row);
    if (!provider.canRefresh(tokens)) {
      if (expiresAt !== undefined && expiresAt > now) return this.ok(tokens.accessToken, expiresAt, expiresAt);
      return this.gone(row, "connection_expired", "the token expired and the service gave no refresh token");
    }
    const lease = new Date(now + 2 * this.ctx.config.upstream.timeoutMs);
    // Only the tokens read here may be refreshed: another instance that renewed them meanwhile
    // (and released its lease) has spent the refresh token this row still holds.
    const claimed = await this.ctx.db.connection.updateMany({
      where: {
        id: row.id,
        status: "active",
        accessTokenEnc: row.accessTokenEnc,
        OR: [{ refreshingUntil: null }, { refreshingUntil: { lt: dateOf(this.ctx.clock) } }],
      },
      data: { refreshingUntil: lease },
    });
    if (claimed.count !== 1) return this.renewedElsewhere(config, row, tokens.accessToken, lease.getTime(), now);
    this.stats.refreshes++;
    let fresh: UpstreamTokens;
    try {
      fresh = await this.callService(config, () => provider.refresh(tokens));
    } catch (err) {
      await this.ctx.db.connection.update({ where: { id: row.id }, data: { refreshingUntil: null } });
      if (err instanceof UpstreamError && err.kind === "invalid_grant") return this.gone(row, "connection_refresh_refused", err.message);
      throw err;
    }
    const renewedAt = dateOf(this.ctx.clock);
    await this.ctx.db.connection.update({
      where: { id: row.id },
      data: {
        accessTokenEnc: await this.ctx.secrets.encrypt(fresh.accessToken),
        refreshTokenEnc: await this.ctx.secrets.encryptOptional(fresh.refreshToken ?? tokens.refreshToken),
        scope: fresh.scope ?? row.scope,
        accessExpiresAt: fresh.accessExpiresAt ?? null,
        refreshingUntil: null,
        lastCheckedAt: renewedAt,
        lastUsedAt: renewedAt,
      },
    });
    await audit(this.ctx.db, { type: "connection.refreshed", subject: row.subject, detail: { connection: row.name } });
    return this.ok(fresh.accessToken, now + this.ctx.config.upstreamRecheckSeconds * 1000, fresh.accessExpiresAt?.getTime());
  }

  /**
   * Another instance renewed the token (its new one is stored) or is renewing it now (the current
   * one serves while it is still valid); otherwise the caller retries shortly.
   */
  private async renewedElsewhere(config: ConnectionConfig, read: ConnectionRow, current: string, leaseEnd: number, now: number): Promise<ConnectionState> {
    const row = await this.ctx.db.connection.findUnique({ where: { id: read.id } });
    if (row?.status !== "active") return { status: "missing", reason: row ? "revoked" : "not_connected" };
    const expiresAt = row.accessExpiresAt?.getTime();
    if (row.accessTokenEnc !== read.accessTokenEnc)
      return this.ok(await this.ctx.secrets.decrypt(row.accessTokenEnc), now + this.ctx.config.upstreamRecheckSeconds * 1000, expiresAt);
    if (expiresAt !== undefined && expiresAt > now) return this.ok(current, Math.min(expiresAt, leaseEnd), expiresAt);
    throw new UpstreamUnavailable(`the ${config.title} token is being renewed; retry in a moment`, 1);
  }

  private ok(token: string, recheckAt: number, expiresAt: number | undefined): ConnectionState {
    return { status: "ok", token, validUntil: Math.min(recheckAt, expiresAt === undefined ? Number.POSITIVE_INFINITY : expiresAt - REFRESH_AHEAD_MS) };
  }

  /** Marks a connection the service no longer honours: the servers that need it say so until the user connects again. */
  private async gone(row: ConnectionRow, reason: string, detail: string): Promise<ConnectionState> {
    const ended = await this.ctx.db.connection.updateMany({
      where: { id: row.id, status: "active" },
      data: { status: "revoked", revokedReason: reason, refreshingUntil: null },
    });
    if (ended.count === 1) {
      this.ctx.logger.info({ subject: row.subject, connection: row.name, reason, detail: firstLine(detail) }, "a connected account is no longer usable");
      await audit(this.ctx.db, { type: "connection.invalid", subject: row.subject, detail: { connection: row.name, reason } });
    }
    return { status: "missing", reason: "revoked" };
  }

  private async tokensOf(row: ConnectionRow): Promise<UpstreamTokens> {
    return {
      accessToken: await this.ctx.secrets.decrypt(row.accessTokenEnc),
      refreshToken: (await this.ctx.secrets.decryptOptional(row.refreshTokenEnc)) ?? undefined,
      scope: row.scope ?? undefined,
      accessExpiresAt: row.accessExpiresAt ?? undefined,
    };
  }

  /** A call to the service: network failures, timeouts, 5xx and refused credentials become UpstreamUnavailable. */
  private async callService<T>(config: ConnectionConfig, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (err instanceof UpstreamError && (err.kind === "invalid_grant" || err.kind === "denied" || err.kind === "protocol")) throw err;
      this.ctx.logger.warn({ connection: config.name, err: firstLine(err) }, "connected-account service unavailable");
      throw new UpstreamUnavailable(`${config.title} is not reachable right now; retry shortly`);
    }
  }

  /** The user's connections, every configured one listed (connected or not), for /account. */
  async list(subject: string): Promise<ConnectionView[]> {
    const configured = this.ctx.config.catalogue.connections ?? [];
    if (configured.length === 0) return [];
    const rows = await this.ctx.db.connection.findMany({ where: { subject } });
    return configured.map((config) => {
      const row = rows.find((r) => r.name === config.name);
      return {
        name: config.name,
        title: config.title,
        connected: row?.status === "active",
        account: row?.accountLogin ?? null,
        scope: row?.scope ?? null,
        connectedAt: row?.createdAt ?? null,
        lastUsedAt: row?.lastUsedAt ?? null,
        broken: row !== undefined && row.status !== "active",
      };
    });
  }

  /**
   * Disconnects: the token is revoked at the service where it can be, the row removed, and the
   * grants of the servers that need the connection end (their clients authorize again, and connect).
   */
  async disconnect(subject: string, name: string, ip: string | undefined): Promise<boolean> {
    const row = await this.ctx.db.connection.findUnique({ where: { subject_name: { subject, name } } });
    if (!row) return false;
    await this.ctx.db.connection.deleteMany({ where: { id: row.id } });
    const config = this.config(name);
    if (config && row.status === "active")
      await this.provider(config)
        .revoke(await this.tokensOf(row))
        .catch((err: unknown) => this.ctx.logger.warn({ connection: name, err: firstLine(err) }, "could not revoke a connected account at its service"));
    const resources = this.ctx.config.catalogue.servers.filter((s) => s.connection?.name === name).map((s) => s.resourceUrl);
    const grants = await this.ctx.db.grant.findMany({ where: { subject, resource: { in: resources }, revokedAt: null }, select: { id: true } });
    await this.lifecycle.revokeGrants(
      grants.map((g) => g.id),
      "connection_removed",
    );
    await audit(this.ctx.db, { type: "connection.disconnected", subject, ip, detail: { connection: name, grants: grants.length } });
    return true;
  }
}
