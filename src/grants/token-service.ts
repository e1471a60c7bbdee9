// Issues, rotates, revokes and describes the broker's own tokens (the TokenIssuer behind /token,
// /revoke and /introspect). Every state change of one step happens in one database transaction.
import { randomUUID } from "node:crypto";
import type { GrantsContext, RevocationBus } from "./context.ts";
import { grantDeathReason, initialDeadlines, type GrantLifecycle } from "./lifecycle.ts";
import type { UpstreamSessions } from "./upstream-sessions.ts";
import type { AccessValidator } from "./access-validation.ts";
import { CredentialRejected, InvalidGrant, InvalidRequest, InvalidScope, InvalidTarget, UnauthorizedClient } from "./errors.ts";
import { deriveSecret, hashPresentedToken, mintSecret, type MintedSecret } from "./token-format.ts";
import { verifyPkceS256 } from "./pkce.ts";
import { audit } from "./audit.ts";
import type { TokenIssuer } from "./ports.ts";
import type { IntrospectionResponse, RegisteredClient, TokenResponse } from "./types.ts";
import { DEFAULT_SCOPE, machineSubject } from "./types.ts";
import type { Db, Tx } from "../store/db.ts";
import { dateOf } from "./clock.ts";

const INVALID_CODE = "The authorization code is invalid, expired or was already used.";
const INVALID_REFRESH = "The refresh token is invalid, expired or revoked.";

/** Thrown inside a transaction when a conditional claim lost a race; handled after rollback. */
class LostClaim extends Error {}

interface GrantRow {
  id: string;
  clientId: string;
  subject: string | null;
  upstreamSessionId: string | null;
  revokedAt: Date | null;
  idleExpiresAt: Date;
  absoluteExpiresAt: Date;
}

function scopeSet(scope: string): Set<string> {
  return new Set(scope.split(" ").filter(Boolean));
}

export class TokenService implements TokenIssuer {
  constructor(
    private readonly ctx: GrantsContext,
    private readonly lifecycle: GrantLifecycle,
    private readonly sessions: UpstreamSessions,
    private readonly validator: AccessValidator,
    private readonly bus: RevocationBus,
  ) {}

  private get db(): Db {
    return this.ctx.db;
  }

  /** Creates an access token (and optionally a refresh token) for a grant, inside `tx`. */
  private async issue(
    tx: Tx,
    grant: GrantRow,
    scope: string,
    resource: string,
    now: Date,
    options: { access?: MintedSecret; refresh?: MintedSecret | null; parentRefreshId?: string },
  ): Promise<{ response: TokenResponse; refreshId: string | null }> {
    const { config } = this.ctx;
    const access = options.access ?? mintSecret("accessToken");
    const cap = grant.absoluteExpiresAt.getTime();
    const accessExpiresAt = new Date(Math.min(now.getTime() + config.accessTokenTtlSeconds * 1000, cap));
    let refreshId: string | null = null;
    if (options.refresh !== null) {
      const refresh = options.refresh ?? mintSecret("refreshToken");
      refreshId = randomUUID();
      await tx.refreshToken.create({
        data: {
          id: refreshId,
          tokenHash: refresh.hash,
          prefix: refresh.prefix,
          grantId: grant.id,
          clientId: grant.clientId,
          resource,
          scope,
          parentId: options.parentRefreshId ?? null,
          expiresAt: new Date(Math.min(now.getTime() + config.refreshTokenTtlSeconds * 1000, cap)),
        },
      });
      options = { ...options, refresh };
    }
    await tx.accessToken.create({
      data: {
        id: randomUUID(),
        tokenHash: access.hash,
        prefix: access.prefix,
        grantId: grant.id,
        clientId: grant.clientId,
        resource,
        scope,
        refreshTokenId: refreshId,
        expiresAt: accessExpiresAt,
      },
    });
    const response: TokenResponse = {
      access_token: access.value,
      token_type: "Bearer",
      expires_in: Math.max(1, Math.round((accessExpiresAt.getTime() - now.getTime()) / 1000)),
      ...(options.refresh ? { refresh_token: options.refresh.value } : {}),
      scope,
    };
    return { response, refreshId };
  }

  private async touchGrant(tx: Tx, grantId: string, now: Date): Promise<void> {
    const { lastUsedAt, idleExpiresAt } = initialDeadlines(this.ctx.config, now);
    await tx.grant.update({ where: { id: grantId }, data: { lastUsedAt, idleExpiresAt } });
  }

  /**
   * Re-checks the upstream session behind a grant (refresh and introspection honour it too): the
   * rejection when it is dead, null when alive or absent. UpstreamUnavailable goes through.
   */
  private async upstreamRejection(grant: GrantRow): Promise<CredentialRejected | null> {
    if (!grant.upstreamSessionId) return null;
    try {
      await this.sessions.ensureChecked(grant.upstreamSessionId);
      return null;
    } catch (err) {
      if (err instanceof CredentialRejected) return err;
      throw err;
    }
  }

  async exchangeAuthorizationCode(input: {
    code: string;
    client: RegisteredClient;
    redirectUri: string | undefined;
    codeVerifier: string | undefined;
    resource: string | undefined;
  }): Promise<TokenResponse> {
    if (!input.codeVerifier) throw new InvalidRequest("code_verifier is required: PKCE (S256) is mandatory.");
    if (!input.redirectUri) throw new InvalidRequest("redirect_uri is required and must equal the one of the authorization request.");
    const row = await this.db.authorizationCode.findUnique({ where: { codeHash: hashPresentedToken(input.code) }, include: { grant: true } });
    if (!row || row.clientId !== input.client.id) throw new InvalidGrant(INVALID_CODE);
    if (row.consumedAt) return this.codeReplayed(row.grantId, row.clientId);
    const now = dateOf(this.ctx.clock);
    if (row.expiresAt <= now) throw new InvalidGrant(INVALID_CODE);
    if (input.redirectUri !== row.redirectUri) throw new InvalidGrant("redirect_uri does not match the authorization request.");
    if (!verifyPkceS256(input.codeVerifier, row.codeChallenge)) throw new InvalidGrant("PKCE verification failed: code_verifier does not match code_challenge.");
    if (input.resource !== undefined && input.resource !== row.resource) {
      throw new InvalidTarget("resource does not match the resource of the authorization request.");
    }
    const death = grantDeathReason(row.grant, now);
    if (death) throw new InvalidGrant(death);

    try {
      const { response } = await this.db.$transaction(async (tx) => {
        const claim = await tx.authorizationCode.updateMany({ where: { id: row.id, consumedAt: null }, data: { consumedAt: now } });
        if (claim.count !== 1) throw new LostClaim();
        await this.touchGrant(tx, row.grantId, now);
        const issued = await this.issue(tx, row.grant, row.scope, row.resource, now, {});
        await audit(tx, { type: "token.issued", clientId: row.clientId, grantId: row.grantId, subject: row.grant.subject, detail: { grantType: "authorization_code" } });
        return issued;
      });
      return response;
    } catch (err) {
      if (err instanceof LostClaim) return this.codeReplayed(row.grantId, row.clientId);
      throw err;
    }
  }

  /** A code presented twice: the grant it created is revoked (OAuth 2.1 §4.1.3). */
  private async codeReplayed(grantId: string, clientId: string): Promise<never> {
    await audit(this.db, { type: "code.replayed", clientId, grantId });
    await this.lifecycle.revokeGrant(grantId, "code_replay");
    throw new InvalidGrant(INVALID_CODE);
  }

  async refresh(input: { refreshToken: string; client: RegisteredClient; scope: string | undefined; resource: string | undefined }): Promise<TokenResponse> {
    const presentedHash = hashPresentedToken(input.refreshToken);
    const row = await this.db.refreshToken.findUnique({ where: { tokenHash: presentedHash }, include: { grant: true } });
    if (!row || row.clientId !== input.client.id) throw new InvalidGrant(INVALID_REFRESH);
    const now = dateOf(this.ctx.clock);
    // The grant's death says more (idle, maximum age) than the token's own expiry.
    const death = grantDeathReason(row.grant, now);
    if (death) throw new InvalidGrant(death);
    if (row.revokedAt || row.expiresAt <= now) throw new InvalidGrant(INVALID_REFRESH);
    if (input.resource !== undefined && input.resource !== row.resource) {
      throw new InvalidTarget("resource does not match the resource this refresh token was issued for.");
    }
    let scope = row.scope;
    if (input.scope !== undefined) {
      const granted = scopeSet(row.scope);
      const requested = [...scopeSet(input.scope)];
      if (requested.length === 0 || requested.some((s) => !granted.has(s))) {
        throw new InvalidScope(`scope can only narrow on refresh; granted: "${row.scope}".`);
      }
      scope = requested.sort().join(" ");
    }
    const rejected = await this.upstreamRejection(row.grant);
    if (rejected) throw new InvalidGrant(rejected.reason);

    const access = deriveSecret("accessToken", this.ctx.rotationKey, input.refreshToken);
    const successor = deriveSecret("refreshToken", this.ctx.rotationKey, input.refreshToken);
    if (row.consumedAt) return this.presentedAgain(row.id, row.grantId, row.clientId, { access, successor }, now);
    try {
      const { response } = await this.db.$transaction(async (tx) => {
        const graceUntil = new Date(now.getTime() + this.ctx.config.refreshGraceSeconds * 1000);
        const claim = await tx.refreshToken.updateMany({ where: { id: row.id, consumedAt: null, revokedAt: null }, data: { consumedAt: now, graceUntil } });
        if (claim.count !== 1) throw new LostClaim();
        // This token is its parent's successor: its first use ends the parent's grace window.
        await tx.refreshToken.updateMany({ where: { id: row.id, firstUsedAt: null }, data: { firstUsedAt: now } });
        const issued = await this.issue(tx, row.grant, scope, row.resource, now, { access, refresh: successor, parentRefreshId: row.id });
        await tx.refreshToken.update({ where: { id: row.id }, data: { successorId: issued.refreshId } });
        await this.touchGrant(tx, row.grantId, now);
        await audit(tx, { type: "token.refreshed", clientId: row.clientId, grantId: row.grantId, subject: row.grant.subject });
        return issued;
      });
      return response;
    } catch (err) {
      if (err instanceof LostClaim) return this.presentedAgain(row.id, row.grantId, row.clientId, { access, successor }, dateOf(this.ctx.clock));
      throw err;
    }
  }

  /**
   * A rotated refresh token presented again. Within the grace window, and while its successor has
   * not been used, it is a retry of a lost response: the same successor pair is returned (derived,
   * so nothing was stored in plaintext). Otherwise it is reuse, a sign of theft: the grant dies.
   */
  private async presentedAgain(rowId: string, grantId: string, clientId: string, pair: { access: MintedSecret; successor: MintedSecret }, now: Date): Promise<TokenResponse> {
    const row = await this.db.refreshToken.findUniqueOrThrow({ where: { id: rowId } });
    const next = row.successorId ? await this.db.refreshToken.findUnique({ where: { id: row.successorId } }) : null;
    const inGrace = row.graceUntil !== null && now < row.graceUntil;
    if (inGrace && next && !next.firstUsedAt && !next.revokedAt && next.tokenHash === pair.successor.hash) {
      const access = await this.db.accessToken.findUnique({ where: { tokenHash: pair.access.hash } });
      if (access && !access.revokedAt) {
        return {
          access_token: pair.access.value,
          token_type: "Bearer",
          expires_in: Math.max(1, Math.round((access.expiresAt.getTime() - now.getTime()) / 1000)),
          refresh_token: pair.successor.value,
          scope: next.scope,
        };
      }
    }
    await audit(this.db, { type: "refresh.reused", clientId, grantId });
    await this.lifecycle.revokeGrant(grantId, "refresh_reuse");
    throw new InvalidGrant(INVALID_REFRESH);
  }

  async clientCredentials(input: { client: RegisteredClient; scope: string | undefined; resource: string | undefined }): Promise<TokenResponse> {
    if (input.client.tokenEndpointAuthMethod === "none") {
      throw new UnauthorizedClient("client_credentials requires a confidential client (one with a client secret).");
    }
    if (!input.client.grantTypes.includes("client_credentials")) {
      throw new UnauthorizedClient("This client is not registered for the client_credentials grant.");
    }
    // Registrations made before /register refused client_credentials may still say so.
    if (input.client.registrationType !== "manual") {
      throw new UnauthorizedClient("client_credentials is only for machine clients the operator registered (npx mcp-auth-broker clients add --grant-type client_credentials).");
    }
    const resource = input.resource ?? this.ctx.config.resourceUrl;
    const scope = input.scope ?? input.client.scope ?? DEFAULT_SCOPE;
    const now = dateOf(this.ctx.clock);
    const { response } = await this.db.$transaction(async (tx) => {
      const grant = await tx.grant.create({
        data: {
          id: randomUUID(),
          clientId: input.client.id,
          kind: "client_credentials",
          subject: machineSubject(input.client.id),
          resource,
          scope,
          ...initialDeadlines(this.ctx.config, now),
        },
      });
      const issued = await this.issue(tx, grant, scope, resource, now, { refresh: null });
      await audit(tx, { type: "token.issued", clientId: input.client.id, grantId: grant.id, subject: grant.subject, detail: { grantType: "client_credentials" } });
      return issued;
    });
    return response;
  }

  async revoke(input: { token: string; client: RegisteredClient; tokenTypeHint: string | undefined }): Promise<void> {
    const hash = hashPresentedToken(input.token);
    const lookups = input.tokenTypeHint === "access_token" ? (["access", "refresh"] as const) : (["refresh", "access"] as const);
    for (const kind of lookups) {
      if (kind === "refresh") {
        const row = await this.db.refreshToken.findUnique({ where: { tokenHash: hash }, select: { grantId: true, clientId: true } });
        if (!row) continue;
        // RFC 7009 §2.1: a client may revoke only its own tokens; others are silently ignored.
        if (row.clientId !== input.client.id) return;
        await audit(this.db, { type: "token.revoked", clientId: row.clientId, grantId: row.grantId, detail: { tokenType: "refresh_token" } });
        await this.lifecycle.revokeGrant(row.grantId, "client_revoked");
        return;
      }
      const row = await this.db.accessToken.findUnique({ where: { tokenHash: hash }, select: { id: true, grantId: true, clientId: true } });
      if (!row) continue;
      if (row.clientId !== input.client.id) return;
      await this.db.accessToken.updateMany({ where: { id: row.id, revokedAt: null }, data: { revokedAt: dateOf(this.ctx.clock) } });
      await audit(this.db, { type: "token.revoked", clientId: row.clientId, grantId: row.grantId, detail: { tokenType: "access_token" } });
      this.bus.publish({ tokenHashes: [hash] });
      return;
    }
  }

  async introspect(input: { token: string; client: RegisteredClient }): Promise<IntrospectionResponse> {
    const hash = hashPresentedToken(input.token);
    const access = await this.db.accessToken.findUnique({ where: { tokenHash: hash }, select: { clientId: true } });
    if (access) {
      if (access.clientId !== input.client.id) return { active: false };
      try {
        const v = await this.validator.validate(input.token, { requireResource: false });
        return {
          active: true,
          scope: v.scopes.join(" "),
          client_id: v.clientId,
          ...(v.subject ? { sub: v.subject } : {}),
          ...(v.user ? { username: v.user } : {}),
          aud: v.resource,
          iss: this.ctx.config.publicUrl,
          exp: Math.floor(v.expiresAt.getTime() / 1000),
          iat: Math.floor(v.issuedAt.getTime() / 1000),
          token_type: "Bearer",
        };
      } catch (err) {
        if (err instanceof CredentialRejected) return { active: false };
        throw err;
      }
    }
    const refresh = await this.db.refreshToken.findUnique({ where: { tokenHash: hash }, include: { grant: true } });
    const now = dateOf(this.ctx.clock);
    if (!refresh || refresh.clientId !== input.client.id || refresh.revokedAt || refresh.expiresAt <= now || grantDeathReason(refresh.grant, now)) {
      return { active: false };
    }
    if (refresh.consumedAt && !(refresh.graceUntil && now < refresh.graceUntil)) return { active: false };
    if (await this.upstreamRejection(refresh.grant)) return { active: false };
    return {
      active: true,
      scope: refresh.scope,
      client_id: refresh.clientId,
      ...(refresh.grant.subject ? { sub: refresh.grant.subject } : {}),
      aud: refresh.resource,
      iss: this.ctx.config.publicUrl,
      exp: Math.floor(refresh.expiresAt.getTime() / 1000),
      iat: Math.floor(refresh.createdAt.getTime() / 1000),
      token_type: "refresh_token",
    };
  }
}
