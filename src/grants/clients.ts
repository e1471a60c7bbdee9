// The client registry: registration (dynamic or by the operator), lookup, secret verification.
// Secrets are 256-bit random, returned once, stored only as SHA-256 hashes. A third kind of client
// registers itself by publishing a metadata document at the URL it uses as client_id (CIMD):
// metadata-documents.ts fetches and records it when an authorization starts.
import { randomBytes } from "node:crypto";
import { hotStoreOf, type Db } from "../store/db.ts";
import type { HotStore } from "../store/hot-store.ts";
import { constantTimeEqual, displayPrefix, randomToken, sha256Hex } from "../store/secrets.ts";
import { clientMetadataColumns, type ClientMetadata } from "./client-metadata.ts";
import type { ApplicationType, GrantType, JsonWebKeySet, RegisteredClient, TokenEndpointAuthMethod } from "./types.ts";
import { audit } from "./audit.ts";
import { boundedCache } from "./bounded-cache.ts";
import { systemClock, type Clock } from "./clock.ts";
import { documentHost, isMetadataDocumentUrl, isTrustedHost, type MetadataDocuments } from "./metadata-documents.ts";

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

  constructor(
    private readonly db: Db,
    private readonly clock: Clock = systemClock,
    /** Client ID Metadata Documents; without it an https client_id is an unknown client. */
    private readonly documents?: MetadataDocuments,
    /** Lookups on the token endpoint's path; registration and removal stay with Prisma. */
    private readonly hot: HotStore = hotStoreOf(db),
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
   * (404, 410) starts no new authorization (a SignInError says why); any other id is looked up.
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
    return { client: toClient(row), ...(secret ? { clientSecret: secret } : {}) };
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
    if (id.length > 2000) return null;
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

  /** Removes a client and, by cascade, its transactions, consents, grants and tokens. */
  async remove(id: string): Promise<boolean> {
    const deleted = await this.db.client.deleteMany({ where: { id } });
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
