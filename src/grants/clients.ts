// The client registry: registration (dynamic or by the operator), lookup, secret verification.
// Secrets are 256-bit random, returned once, stored only as SHA-256 hashes.
import { randomBytes } from "node:crypto";
import type { Db } from "../store/db.ts";
import { constantTimeEqual, displayPrefix, randomToken, sha256Hex } from "../store/secrets.ts";
import type { ClientMetadata } from "./client-metadata.ts";
import type { GrantType, RegisteredClient, TokenEndpointAuthMethod } from "./types.ts";
import { audit } from "./audit.ts";
import { systemClock, type Clock } from "./clock.ts";

type ClientRow = Awaited<ReturnType<Db["client"]["findUniqueOrThrow"]>>;

function toClient(row: ClientRow): RegisteredClient {
  return {
    id: row.id,
    redirectUris: JSON.parse(row.redirectUris) as string[],
    tokenEndpointAuthMethod: row.tokenEndpointAuthMethod as TokenEndpointAuthMethod,
    grantTypes: JSON.parse(row.grantTypes) as GrantType[],
    responseTypes: JSON.parse(row.responseTypes) as string[],
    scope: row.scope,
    clientName: row.clientName,
    clientUri: row.clientUri,
    logoUri: row.logoUri,
    softwareId: row.softwareId,
    softwareVersion: row.softwareVersion,
    registrationType: row.registrationType === "manual" ? "manual" : "dynamic",
    createdAt: row.createdAt,
    lastUsedAt: row.lastUsedAt,
  };
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
  ) {}

  async register(metadata: ClientMetadata, registrationType: "dynamic" | "manual", ip?: string): Promise<Registration> {
    const id = `mab_c_${randomBytes(16).toString("base64url")}`;
    const secret = metadata.tokenEndpointAuthMethod === "none" ? undefined : randomToken("mab_cs_");
    const row = await this.db.client.create({
      data: {
        id,
        secretHash: secret ? sha256Hex(secret) : null,
        secretPrefix: secret ? displayPrefix(secret) : null,
        redirectUris: JSON.stringify(metadata.redirectUris),
        tokenEndpointAuthMethod: metadata.tokenEndpointAuthMethod,
        grantTypes: JSON.stringify(metadata.grantTypes),
        responseTypes: JSON.stringify(metadata.responseTypes),
        scope: metadata.scope,
        clientName: metadata.clientName,
        clientUri: metadata.clientUri,
        logoUri: metadata.logoUri,
        softwareId: metadata.softwareId,
        softwareVersion: metadata.softwareVersion,
        registrationType,
      },
    });
    await audit(this.db, { type: "client.registered", clientId: id, ip, detail: { registrationType, name: metadata.clientName } });
    return { client: toClient(row), ...(secret ? { clientSecret: secret } : {}) };
  }

  async get(id: string): Promise<RegisteredClient | null> {
    if (id.length > 200) return null;
    const row = await this.db.client.findUnique({ where: { id } });
    return row ? toClient(row) : null;
  }

  async list(): Promise<RegisteredClient[]> {
    return (await this.db.client.findMany({ orderBy: { createdAt: "asc" } })).map(toClient);
  }

  /** Removes a client and, by cascade, its transactions, consents, grants and tokens. */
  async remove(id: string): Promise<boolean> {
    const deleted = await this.db.client.deleteMany({ where: { id } });
    if (deleted.count) await audit(this.db, { type: "client.removed", clientId: id });
    return deleted.count > 0;
  }

  async verifySecret(clientId: string, secret: string): Promise<boolean> {
    const row = await this.db.client.findUnique({ where: { id: clientId }, select: { secretHash: true } });
    // Compare even when there is no client, so timing does not tell which ids exist.
    return constantTimeEqual(sha256Hex(secret), row?.secretHash ?? "0".repeat(64)) && Boolean(row?.secretHash);
  }

  /** Records use, at most once a minute per client. */
  touch(id: string): void {
    const now = this.clock.now();
    if (now - (this.touched.get(id) ?? 0) < 60_000) return;
    this.touched.set(id, now);
    void this.db.client.updateMany({ where: { id }, data: { lastUsedAt: new Date(now) } }).catch(() => undefined);
  }
}
