// Grants as the operator sees them (`grants list`, `clients show|remove`): who holds access through
// which client, and whether it is still alive. Read-only; revocation is lifecycle.ts.
import type { Db } from "../store/db.ts";
import { grantEnd, type GrantEnd } from "./lifecycle.ts";
import { liveGrantWhere } from "./live-grants.ts";

export type GrantStatus = "live" | "revoked" | "expired";

export interface GrantSummary {
  readonly id: string;
  readonly clientId: string;
  readonly clientName: string | null;
  /** Upstream subject (`github:583231`), `client:<id>` or null for a machine client's grant. */
  readonly subject: string | null;
  /** The user's login at the upstream IdP, when there is a user. */
  readonly user: string | null;
  readonly kind: string;
  readonly scope: string;
  readonly resource: string;
  readonly createdAt: Date;
  readonly lastUsedAt: Date;
  readonly idleExpiresAt: Date;
  readonly absoluteExpiresAt: Date;
  readonly revokedAt: Date | null;
  readonly revokedReason: string | null;
  readonly status: GrantStatus;
  /** How and when it ended (revocation reason, idle_timeout or max_age); null while live. */
  readonly ended: GrantEnd | null;
}

export interface GrantFilter {
  /** Only the grants of this upstream subject. */
  readonly user?: string | undefined;
  /** Only the grants of this client. */
  readonly client?: string | undefined;
  /** Include revoked and expired grants (default: live ones only). */
  readonly all?: boolean | undefined;
  /** Only the grants for this resource (one catalogue server). */
  readonly resource?: string | undefined;
}

export interface GrantListing {
  /** Newest first. */
  listGrants(filter?: GrantFilter): Promise<GrantSummary[]>;
  /** One grant, live or not; null when there is no grant with this id. */
  findGrant(id: string): Promise<GrantSummary | null>;
  /** How many grants are alive now. */
  countLive(): Promise<number>;
}

const include = { client: { select: { clientName: true } }, upstreamSession: { select: { login: true } } } as const;

type GrantRow = Awaited<ReturnType<Db["grant"]["findUniqueOrThrow"]>> & {
  client: { clientName: string | null };
  upstreamSession: { login: string | null } | null;
};

function toSummary(row: GrantRow, now: Date): GrantSummary {
  const ended = grantEnd(row, now);
  return {
    id: row.id,
    clientId: row.clientId,
    clientName: row.client.clientName,
    subject: row.subject,
    user: row.upstreamSession?.login ?? null,
    kind: row.kind,
    scope: row.scope,
    resource: row.resource,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    idleExpiresAt: row.idleExpiresAt,
    absoluteExpiresAt: row.absoluteExpiresAt,
    revokedAt: row.revokedAt,
    revokedReason: row.revokedReason,
    status: ended ? (row.revokedAt ? "revoked" : "expired") : "live",
    ended,
  };
}

export function createGrantListing(db: Db): GrantListing {
  return {
    async listGrants(filter = {}) {
      const now = new Date();
      const rows = await db.grant.findMany({
        where: {
          ...(filter.user ? { subject: filter.user } : {}),
          ...(filter.client ? { clientId: filter.client } : {}),
          ...(filter.resource ? { resource: filter.resource } : {}),
          ...(filter.all ? {} : liveGrantWhere(now)),
        },
        include,
        orderBy: { createdAt: "desc" },
      });
      return rows.map((row) => toSummary(row, now));
    },
    countLive: () => db.grant.count({ where: liveGrantWhere(new Date()) }),
    async findGrant(id) {
      const row = await db.grant.findUnique({ where: { id }, include });
      return row ? toSummary(row, new Date()) : null;
    },
  };
}
