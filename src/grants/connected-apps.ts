// A signed-in user's connected apps (/account): their live grants as they need to judge them
// (which application, verified or not, where it sends them back, what it may do, since when,
// until when), and revocation of one or all of them. Revocation is the lifecycle's, the same
// cascade as the operator's `grants revoke`, published on the revocation bus.
import { isTrustedHost } from "./metadata-documents.ts";
import { serverByResource } from "../config/catalogue.ts";
import type { GrantsContext } from "./context.ts";
import type { GrantLifecycle } from "./lifecycle.ts";
import { liveGrantWhere } from "./live-grants.ts";
import { audit } from "./audit.ts";
import { dateOf } from "../lib/clock.ts";

export interface ConnectedApp {
  readonly grantId: string;
  readonly clientId: string;
  readonly clientName: string | null;
  /** Registered by the operator, or described by a document on a CIMD_TRUSTED_HOSTS host. */
  readonly verified: boolean;
  /** Where the application sends the browser back: hosts of its redirect URIs (or app schemes). */
  readonly redirectHosts: readonly string[];
  readonly scopes: readonly string[];
  readonly createdAt: Date;
  readonly lastUsedAt: Date;
  /** The earlier of the idle and the absolute deadline. */
  readonly endsAt: Date;
  /** The MCP server it may use: its title (or the resource URI of a server no longer served). */
  readonly server: string;
}

/** `127.0.0.1:7777` for a web or loopback redirect, `cursor:` for a private-use app scheme. */
function redirectHost(uri: string): string | null {
  try {
    const url = new URL(uri);
    return url.protocol === "http:" || url.protocol === "https:" ? url.host : url.protocol;
  } catch {
    return null;
  }
}

function redirectHosts(redirectUrisJson: string): string[] {
  let uris: unknown;
  try {
    uris = JSON.parse(redirectUrisJson);
  } catch {
    return [];
  }
  if (!Array.isArray(uris)) return [];
  return [...new Set(uris.map((u) => (typeof u === "string" ? redirectHost(u) : null)).filter((h): h is string => h !== null))];
}

/** Who vouches for a client: the operator, or a metadata document on a host the operator trusts. */
function isVerifiedClient(registrationType: string, clientId: string, trustedHosts: readonly string[]): boolean {
  return registrationType === "manual" || (registrationType === "cimd" && isTrustedHost(clientId, trustedHosts));
}

export interface RevokeContext {
  readonly ip?: string | undefined;
}

export class ConnectedApps {
  constructor(
    private readonly ctx: GrantsContext,
    private readonly lifecycle: GrantLifecycle,
  ) {}

  /** The live grants of one upstream subject, newest first. */
  async list(subject: string): Promise<ConnectedApp[]> {
    const rows = await this.ctx.db.grant.findMany({
      where: { subject, ...liveGrantWhere(dateOf(this.ctx.clock)) },
      include: { client: { select: { clientName: true, registrationType: true, redirectUris: true } } },
      orderBy: [{ createdAt: "desc" }, { id: "asc" }],
    });
    return rows.map((row) => ({
      grantId: row.id,
      clientId: row.clientId,
      clientName: row.client.clientName,
      verified: isVerifiedClient(row.client.registrationType, row.clientId, this.ctx.config.clients.cimd.trustedHosts),
      redirectHosts: redirectHosts(row.client.redirectUris),
      scopes: row.scope.split(" ").filter(Boolean),
      createdAt: row.createdAt,
      lastUsedAt: row.lastUsedAt,
      endsAt: row.idleExpiresAt < row.absoluteExpiresAt ? row.idleExpiresAt : row.absoluteExpiresAt,
      server: serverByResource(this.ctx.config.catalogue, row.resource)?.title ?? row.resource,
    }));
  }

  /**
   * Revokes one live grant of this subject. False when there is no such grant: another user's,
   * one already dead, or none at all (the caller cannot tell which).
   */
  async revoke(subject: string, grantId: string, at: RevokeContext = {}): Promise<boolean> {
    if (grantId.length > 100) return false;
    const grant = await this.ctx.db.grant.findFirst({ where: { id: grantId, subject, ...liveGrantWhere(dateOf(this.ctx.clock)) }, select: { id: true } });
    if (!grant) return false;
    await this.revokeIds(subject, [grant.id], at);
    return true;
  }

  /** Revokes every live grant of this subject; returns the ids revoked. */
  async revokeAll(subject: string, at: RevokeContext = {}): Promise<string[]> {
    const grants = await this.ctx.db.grant.findMany({ where: { subject, ...liveGrantWhere(dateOf(this.ctx.clock)) }, select: { id: true } });
    return this.revokeIds(
      subject,
      grants.map((g) => g.id),
      at,
    );
  }

  private async revokeIds(subject: string, ids: readonly string[], at: RevokeContext): Promise<string[]> {
    const revoked = await this.lifecycle.revokeGrants(ids, "user_revoked");
    if (revoked.length === 0) return revoked;
    // The lifecycle records the cascade; this records who asked, from where.
    const clients = await this.ctx.db.grant.findMany({ where: { id: { in: revoked } }, select: { id: true, clientId: true } });
    for (const { id, clientId } of clients) {
      await audit(this.ctx.db, { type: "account.revoked", grantId: id, clientId, subject, ip: at.ip, detail: { reason: "user_revoked", by: "account_page" } });
    }
    return revoked;
  }
}
