// Validation of broker access tokens: the per-request path of /mcp. A bounded LRU keyed by the
// token's hash answers repeated requests without the database or the upstream IdP, for no longer
// than the token, the grant's deadlines and the upstream re-check window allow. Revocations in
// this process evict at once (RevocationBus).
import { passesUpstreamToken, serverByResource } from "../config/catalogue.ts";
import type { LRUCache } from "lru-cache";
import { boundedCache } from "../lib/bounded-cache.ts";
import type { GrantsContext, RevocationBus } from "./context.ts";
import { grantDeathReason } from "./lifecycle.ts";
import type { UpstreamSessions } from "./upstream-sessions.ts";
import { CredentialRejected } from "./errors.ts";
import { hashPresentedToken } from "./token-format.ts";
import type { UsageRecorder } from "./usage-recorder.ts";
import { SingleFlight } from "../lib/single-flight.ts";
import { dateOf } from "../lib/clock.ts";
import { machineSubject } from "./types.ts";
import type { IdentityFacts } from "./policy.ts";
import type { AccessTokenWithGrant } from "../store/hot-store.ts";
import { grantAccess, type ServerAccessDecision } from "./server-access.ts";
import type { Connections, ConnectionState } from "./connections.ts";
import type { CallerConnection } from "./caller-identity.ts";

export interface ValidatedAccess {
  readonly tokenHash: string;
  readonly grantId: string;
  readonly clientId: string;
  /** Upstream subject (`github:123`), or `client:<id>` for a machine client (client_credentials). */
  readonly subject: string;
  readonly user: string | null;
  readonly scopes: readonly string[];
  readonly resource: string;
  readonly upstreamSessionId: string | null;
  readonly issuedAt: Date;
  readonly expiresAt: Date;
  /**
   * What access rules read about the caller, as of the last upstream check (or the sign-in): login,
   * verified e-mails, groups, memberships; a list the broker does not know is undefined. A machine
   * client: its subject alone.
   */
  readonly facts: IdentityFacts;
  /**
   * Decrypted upstream access token, only loaded with FORWARD_UPSTREAM_TOKEN or MCP_SERVER_TOKEN_ENV
   * (kept in memory only).
   */
  readonly upstreamAccessToken?: string | undefined;
  /** The user's own token for the connection the server names (connected accounts), or why there is none. */
  readonly connection?: CallerConnection | undefined;
}

function toCaller(state: ConnectionState, name: string): CallerConnection {
  return state.status === "ok" ? { name, token: state.token } : { name, token: undefined, missing: state.reason };
}

interface CacheEntry {
  readonly access: ValidatedAccess;
  /** Epoch ms after which the entry must be re-validated. */
  readonly validUntil: number;
}

export interface ValidatorStats {
  hits: number;
  misses: number;
}

const NOT_FOR_THIS_RESOURCE = "this token was not issued for this resource";

/** What the holder of a token is told when the rules refuse it. */
function refusal(decision: Extract<ServerAccessDecision, { admitted: false }>, machine: boolean): string {
  if (decision.refusedBy === "unknown_server") return NOT_FOR_THIS_RESOURCE;
  if (decision.refusedBy === "policy" && machine) return "the access policy of this service does not admit this machine client";
  return decision.reason;
}

/**
 * Refuses a token that is unknown, revoked, expired, of a dead grant, or of a machine grant the
 * operator no longer allows; whether it is a machine's (a grant without a user).
 */
function liveToken(row: AccessTokenWithGrant | null, now: Date): { readonly live: AccessTokenWithGrant; readonly machine: boolean } {
  if (!row) throw new CredentialRejected("the access token is not valid");
  // A grant without a user is only ever a machine client the operator registered and still
  // allows client_credentials; tokens of self-registered ones (issued before /register refused
  // the grant) or of clients the operator has since changed are dead.
  const machine = row.grant.upstreamSessionId === null;
  if (
    machine &&
    !(
      row.grant.kind === "client_credentials" &&
      row.grant.client.registrationType === "manual" &&
      (JSON.parse(row.grant.client.grantTypes) as string[]).includes("client_credentials")
    )
  ) {
    throw new CredentialRejected("this token carries no signed-in user and was not issued to an operator-registered machine client");
  }
  if (row.revokedAt) throw new CredentialRejected("the access token was revoked");
  if (row.expiresAt <= now) throw new CredentialRejected("the access token expired");
  const death = grantDeathReason(row.grant, now);
  if (death) throw new CredentialRejected(death);
  return { live: row, machine };
}

function validatedAccess(
  hash: string,
  row: AccessTokenWithGrant,
  facts: IdentityFacts,
  upstreamAccessToken: string | undefined,
  connection: CallerConnection | undefined,
): ValidatedAccess {
  return {
    tokenHash: hash,
    grantId: row.grantId,
    clientId: row.clientId,
    subject: row.grant.subject ?? machineSubject(row.clientId),
    user: row.grant.upstreamSession?.login ?? null,
    scopes: row.scope.split(" ").filter(Boolean),
    resource: row.resource,
    upstreamSessionId: row.grant.upstreamSessionId,
    issuedAt: row.createdAt,
    expiresAt: row.expiresAt,
    facts,
    upstreamAccessToken,
    connection,
  };
}

export class AccessValidator {
  private readonly cache: LRUCache<string, CacheEntry>;
  private readonly byGrant = new Map<string, Set<string>>();
  private readonly loads = new SingleFlight<CacheEntry>();
  readonly stats: ValidatorStats = { hits: 0, misses: 0 };

  constructor(
    private readonly ctx: GrantsContext,
    private readonly sessions: UpstreamSessions,
    private readonly usage: UsageRecorder,
    bus: RevocationBus,
    private readonly connections?: Connections,
    maxEntries = 50_000,
  ) {
    this.cache = boundedCache<string, CacheEntry>(maxEntries, {
      dispose: (entry, key) => this.byGrant.get(entry.access.grantId)?.delete(key),
    });
    bus.subscribe((revocation) => {
      for (const grantId of revocation.grantIds ?? []) {
        for (const key of [...(this.byGrant.get(grantId) ?? [])]) this.cache.delete(key);
        this.byGrant.delete(grantId);
      }
      for (const hash of revocation.tokenHashes ?? []) this.cache.delete(hash);
    });
  }

  /**
   * Forgets every validation: the next use of each token reads it again and decides it under the
   * configuration as it is now (after a reload of the catalogue, whose rules may have narrowed).
   */
  forgetAll(): void {
    this.cache.clear();
    this.byGrant.clear();
  }

  /**
   * Validates a presented access token. Throws CredentialRejected (401 invalid_token) or
   * UpstreamUnavailable (503). With `requireResource` (default) the token's audience must be
   * `resource` (the server asked, by default the one at /mcp): a token for one server of the
   * catalogue is no token at another.
   */
  async validate(token: string, options: { requireResource?: boolean; resource?: string } = {}): Promise<ValidatedAccess> {
    const hash = hashPresentedToken(token);
    const now = this.ctx.clock.now();
    let entry = this.cache.get(hash);
    if (entry && entry.validUntil > now) {
      this.stats.hits++;
    } else {
      this.stats.misses++;
      if (entry) this.cache.delete(hash);
      entry = await this.load(hash);
    }
    if ((options.requireResource ?? true) && entry.access.resource !== (options.resource ?? this.ctx.config.resourceUrl)) {
      throw new CredentialRejected(NOT_FOR_THIS_RESOURCE);
    }
    this.usage.touch(entry.access.grantId, now);
    return entry.access;
  }

  /** Concurrent misses for one token share one database read and one upstream check. */
  private load(hash: string): Promise<CacheEntry> {
    return this.loads.run(hash, () => this.loadFromStore(hash));
  }

  private async loadFromStore(hash: string): Promise<CacheEntry> {
    const { live: row, machine } = liveToken(await this.ctx.hot.accessTokenByHash(hash), dateOf(this.ctx.clock));
    this.usage.seen(row.grantId, row.grant.lastUsedAt);
    const { facts, validUntil } = await this.currentFacts(row);
    // The global policy and the rules of the token's server, as configured now, on the facts as of
    // the last check: a restart with narrower rules ends access at once (a machine client's too),
    // and a grant the re-check just ended is not honoured by a request that read it before.
    const decision = grantAccess(this.ctx, row.resource, facts);
    if (!decision.admitted) throw new CredentialRejected(refusal(decision, machine));
    // Read after the check: a refresh during the check has rotated the upstream token.
    // Needed only by a server that is given it (forwardUpstreamToken, or a stdio server's tokenEnv).
    let upstreamAccessToken: string | undefined;
    const server = serverByResource(this.ctx.config.catalogue, row.resource);
    if (row.grant.upstreamSessionId && server && passesUpstreamToken(server))
      upstreamAccessToken = (await this.sessions.tokensOf(row.grant.upstreamSessionId))?.accessToken;
    const connection = await this.connectionOf(row, server?.connection?.name);
    const until = connection?.status === "ok" ? Math.min(validUntil, connection.validUntil) : validUntil;
    const entry: CacheEntry = {
      access: validatedAccess(hash, row, facts, upstreamAccessToken, connection && toCaller(connection, server?.connection?.name ?? "")),
      validUntil: until,
    };
    // A missing connection is looked up again at the next request: the user may be connecting it now.
    if (until > this.ctx.clock.now() && connection?.status !== "missing") {
      this.cache.set(hash, entry);
      const keys = this.byGrant.get(row.grantId) ?? new Set<string>();
      this.byGrant.set(row.grantId, keys);
      keys.add(hash);
    }
    return entry;
  }

  /** The state of the connection the token's server needs (none: undefined); a machine client has none. */
  private async connectionOf(row: AccessTokenWithGrant, name: string | undefined): Promise<ConnectionState | undefined> {
    if (!name || !this.connections) return undefined;
    if (!row.grant.subject || !row.grant.upstreamSessionId) return { status: "missing", reason: "not_connected" };
    return this.connections.tokenFor(row.grant.subject, name, row.grant.upstreamSessionId);
  }

  /** Who the token speaks for, as of the last upstream check (made now when due), and until when that holds. */
  private async currentFacts(row: AccessTokenWithGrant): Promise<{ facts: IdentityFacts; validUntil: number }> {
    const { config } = this.ctx;
    const validUntil = Math.min(row.expiresAt.getTime(), row.grant.absoluteExpiresAt.getTime(), row.grant.idleExpiresAt.getTime());
    if (!row.grant.upstreamSessionId) return { facts: { subject: machineSubject(row.clientId) }, validUntil };
    const checked = await this.sessions.ensureChecked(row.grant.upstreamSessionId, row.grant.upstreamSession ?? undefined);
    // With UPSTREAM_RECHECK_SECONDS=0 every use checks upstream: nothing is cached.
    return {
      facts: checked.facts,
      validUntil: config.upstreamRecheckSeconds === 0 ? 0 : Math.min(validUntil, checked.lastCheckedAt.getTime() + config.upstreamRecheckSeconds * 1000),
    };
  }
}
