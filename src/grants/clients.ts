// The client registry: registration (dynamic or by the operator), lookup, secret verification.
// Secrets are 256-bit random, returned once, stored only as SHA-256 hashes. A third kind of client
// registers itself by publishing a metadata document at the URL it uses as client_id (CIMD):
// metadata-documents.ts fetches and records it when an authorization starts.
import { randomBytes } from "node:crypto";
import { hotStoreOf, type Db, type Prisma } from "../store/db.ts";
import type { Logger } from "../logger.ts";
import type { HotStore } from "../store/hot-store.ts";
import { constantTimeEqual, displayPrefix, randomToken, sha256Hex } from "../crypto/tokens.ts";
import { clientMetadataColumns, type ClientMetadata } from "./client-metadata.ts";
import type { ApplicationType, GrantType, JsonWebKeySet, RegisteredClient, TokenEndpointAuthMethod } from "./types.ts";
import { audit } from "./audit.ts";
import { boundedCache } from "../lib/bounded-cache.ts";
import { systemClock, type Clock } from "../lib/clock.ts";
import { documentHost, isMetadataDocumentUrl, isTrustedHost, type MetadataDocuments } from "./metadata-documents.ts";
import { MAX_URL_LENGTH } from "./types.ts";

type ClientRow = Awaited<ReturnType<Db["client"]["findUniqueOrThrow"]>>;

/**
 * Registered key sets, parsed once per distinct text: the same object for every read of a client's
 * row, so the keys imported from it for verifying its assertions are kept (client-assertion.ts).
 */
const keySets = boundedCache<string, JsonWebKeySet>(1000);

function keySetOf(text: string): JsonWebKeySet {
  let set = keySets.get(text);
  if (!set) {
    set = JSON.parse(text) as JsonWebKeySet;
    keySets.set(text, set);
  }
  return set;
}

const REGISTRATION_TYPES = new Set<RegisteredClient["registrationType"]>(["manual", "dynamic", "cimd"]);

function toClient(row: ClientRow, trustedHosts: readonly string[] = []): RegisteredClient {
  const registrationType = REGISTRATION_TYPES.has(row.registrationType as RegisteredClient["registrationType"])
    ? (row.registrationType as RegisteredClient["registrationType"])
    : "dynamic";
  return {
    id: row.id,
    redirectUris: JSON.parse(row.redirectUris) as string[],
    tokenEndpointAuthMethod: row.tokenEndpointAuthMethod as TokenEndpointAuthMethod,
    fallbackAuthMethod: row.fallbackAuthMethod === "none" ? "none" : null,
    jwksUri: row.jwksUri,
    jwks: row.jwks ? keySetOf(row.jwks) : null,
    signingAlg: row.signingAlg,
    grantTypes: JSON.parse(row.grantTypes) as GrantType[],
    responseTypes: JSON.parse(row.responseTypes) as string[],
    scope: row.scope,
    clientName: row.clientName,
    clientUri: row.clientUri,
    logoUri: row.logoUri,
    softwareId: row.softwareId,
    softwareVersion: row.softwareVersion,
    applicationType: row.applicationType === "native" || row.applicationType === "web" ? (row.applicationType as ApplicationType) : null,
    registrationType,
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
    ...(registrationType === "cimd" ? { metadataDocument: { host: documentHost(row.id), verified: isTrustedHost(row.id, trustedHosts) } } : {}),
  };
}

/**
 * A self-registered client nobody ever completed a sign-in with: it holds no grant and never
 * reached the token endpoint (lastUsedAt is set by client authentication there). /register is open
 * to anyone, and some clients register anew for every connection attempt (claude.ai twice,
 * anthropics/claude-ai-mcp#966), so these are kept briefly and their number is bounded. The
 * operator's and metadata-document clients are never among them.
 */
export const NEVER_USED_CLIENT = { registrationType: "dynamic", lastUsedAt: null, grants: { none: {} } } as const satisfies Prisma.ClientWhereInput;

/** At most this many ids per statement (SQLite allows 32,766 parameters, PostgreSQL 65,535). */
const REMOVE_BATCH = 1000;

/**
 * Removes never-used clients among `ids` (a client used meanwhile stays) and their registration's
 * audit event: a registration that led nowhere leaves nothing behind, so a flood of them cannot grow
 * the audit trail for AUDIT_RETENTION_DAYS either (the sweep's event counts them). Returns how
 * many were removed.
 */
export async function removeNeverUsedClients(db: Pick<Db, "client" | "auditEvent">, ids: readonly string[]): Promise<number> {
  let removed = 0;
  for (let i = 0; i < ids.length; i += REMOVE_BATCH) {
    const batch = ids.slice(i, i + REMOVE_BATCH);
    removed += (await db.client.deleteMany({ where: { id: { in: batch }, ...NEVER_USED_CLIENT } })).count;
    const kept = new Set((await db.client.findMany({ where: { id: { in: batch } }, select: { id: true } })).map((c) => c.id));
    const gone = batch.filter((id) => !kept.has(id));
    if (gone.length > 0) await db.auditEvent.deleteMany({ where: { type: "client.registered", clientId: { in: gone } } });
  }
  return removed;
}

/** How many never-used self-registrations are kept at most (DYNAMIC_REGISTRATION_MAX_UNUSED). */
export interface UnusedClientBound {
  readonly max: number;
  /** Told once per process when the bound is first reached. */
  readonly logger?: Logger;
}

/** A registered client as client authentication sees it: the client, and its secret's check. */
export interface KnownClient {
  readonly client: RegisteredClient;
  /** Whether `secret` is this client's secret (constant-time; false for a client without one). */
  secretMatches(secret: string): boolean;
}

export interface Registration {
  readonly client: RegisteredClient;
  /** Present for confidential clients; shown once, never stored. */
  readonly clientSecret?: string;
}

export class ClientRegistry {
  private readonly touched = new Map<string, number>();
  /** Never-used registrations removed to stay within the bound, since the sweep last asked. */
  private evicted = 0;
  private boundReached = false;

  constructor(
    private readonly db: Db,
    private readonly clock: Clock = systemClock,
    /** Client ID Metadata Documents; without it an https client_id is an unknown client. */
    private readonly documents?: MetadataDocuments,
    /** Lookups on the token endpoint's path; registration and removal stay with Prisma. */
    private readonly hot: HotStore = hotStoreOf(db),
    private readonly unusedBound: UnusedClientBound = { max: Number.POSITIVE_INFINITY },
  ) {}

  private get trustedHosts(): readonly string[] {
    return this.documents?.settings.trustedHosts ?? [];
  }

  private get documentsEnabled(): boolean {
    return this.documents?.settings.enabled ?? false;
  }

  /**
   * The client an authorization request names. A metadata-document client_id is fetched again
   * when its cached copy is stale, so a changed document changes the client and a vanished one
   * (404, 410) starts no new authorization (a PageError says why); any other id is looked up.
   */
  async forAuthorization(id: string): Promise<RegisteredClient | null> {
    if (this.documents && this.documentsEnabled && isMetadataDocumentUrl(id)) await this.documents.ensureFresh(id);
    return this.get(id);
  }

  async register(metadata: ClientMetadata, registrationType: "dynamic" | "manual", ip?: string): Promise<Registration> {
    const id = `mab_c_${randomBytes(16).toString("base64url")}`;
    // Only the secret methods get a secret: a private_key_jwt client proves itself with its keys.
    const usesSecret = metadata.tokenEndpointAuthMethod === "client_secret_basic" || metadata.tokenEndpointAuthMethod === "client_secret_post";
    const secret = usesSecret ? randomToken("mab_cs_") : undefined;
    const row = await this.db.client.create({
      data: {
        id,
        secretHash: secret ? sha256Hex(secret) : null,
        secretPrefix: secret ? displayPrefix(secret) : null,
        ...clientMetadataColumns(metadata),
        registrationType,
      },
    });
    await audit(this.db, { type: "client.registered", clientId: id, ip, detail: { registrationType, name: metadata.clientName } });
    if (registrationType === "dynamic") await this.evictBeyondBound();
    return { client: toClient(row), ...(secret ? { clientSecret: secret } : {}) };
  }

  /**
   * Keeps never-used self-registrations within the bound by removing the oldest: storage stays
   * bounded whoever registers, where a per-address cap would refuse the users of clients that
   * register from a few shared addresses (claude.ai). A client in use is never removed. The count
   * is one index range (Client's registrationType, lastUsedAt, createdAt), the one statement added
   * to a registration under the bound; it includes clients between their first grant and their
   * first token request, which at worst removes a few more never-used ones.
   */
  private async evictBeyondBound(): Promise<void> {
    const { max } = this.unusedBound;
    const count = await this.db.client.count({ where: { registrationType: "dynamic", lastUsedAt: null } });
    if (count <= max) return;
    // Down to 1% under the bound: under a flood, one pass of removal per hundred registrations
    // instead of four statements more for each (a Prisma statement costs ~1–2 ms of CPU here).
    const oldest = await this.db.client.findMany({
      where: NEVER_USED_CLIENT,
      orderBy: [{ createdAt: "asc" }, { id: "asc" }],
      take: count - max + Math.floor(max / 100),
      select: { id: true },
    });
    const removed = await removeNeverUsedClients(
      this.db,
      oldest.map((c) => c.id),
    );
    this.evicted += removed;
    if (removed > 0 && !this.boundReached) {
      this.boundReached = true;
      this.unusedBound.logger?.warn(
        { max: this.unusedBound.max },
        "never-used registrations reached DYNAMIC_REGISTRATION_MAX_UNUSED: the oldest are removed as new ones arrive (a registration flood, or raise the bound)",
      );
    }
  }

  /** How many never-used registrations were removed for the bound since the last call (for the sweep's event). */
  takeEvicted(): number {
    const evicted = this.evicted;
    this.evicted = 0;
    return evicted;
  }

  /** A known client; a metadata-document client only while CIMD is on (CIMD=false forgets them). */
  async get(id: string): Promise<RegisteredClient | null> {
    return (await this.find(id))?.client ?? null;
  }

  /**
   * A known client (as `get`) and a check of a presented secret against its stored hash, from the
   * one read of its row: client authentication needs both, and a second read per token request
   * was a statement more on the token endpoint's path for every confidential client.
   */
  async find(id: string): Promise<KnownClient | null> {
    if (id.length > MAX_URL_LENGTH) return null;
    return this.known(await this.hot.clientById(id));
  }

  /** A client row read with something else (a refresh token's), as `find` would give it. */
  known(row: ClientRow | null): KnownClient | null {
    if (!row || (row.registrationType === "cimd" && !this.documentsEnabled)) return null;
    const { secretHash } = row;
    return {
      client: toClient(row, this.trustedHosts),
      secretMatches: (secret) => secretHash !== null && constantTimeEqual(sha256Hex(secret), secretHash),
    };
  }

  /** Every client, metadata-document clients seen included. */
  async list(): Promise<RegisteredClient[]> {
    return (await this.db.client.findMany({ orderBy: { createdAt: "asc" } })).map((row) => toClient(row, this.trustedHosts));
  }

  /**
   * Removes a client and, by cascade, its transactions, consents, grants and codes; its tokens are
   * no relation of its grants (prisma/sqlite/schema.prisma says why): removed here in the same
   * transaction, by a scan of tables that keep only unexpired tokens.
   */
  async remove(id: string): Promise<boolean> {
    const [, , deleted] = await this.db.$transaction([
      this.db.accessToken.deleteMany({ where: { clientId: id } }),
      this.db.refreshToken.deleteMany({ where: { clientId: id } }),
      this.db.client.deleteMany({ where: { id } }),
    ]);
    if (deleted.count) await audit(this.db, { type: "client.removed", clientId: id });
    return deleted.count > 0;
  }

  /** Records use, at most once a minute per client. */
  touch(id: string): void {
    const now = this.clock.now();
    if (now - (this.touched.get(id) ?? 0) < 60_000) return;
    this.touched.set(id, now);
    void this.hot.touchClient(id, new Date(now)).catch(() => undefined);
  }
}
