// Domain-level harness: a migrated SQLite database in a temp folder and the grants services on it,
// for tests of the grants layer without HTTP.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { randomBytes, randomUUID } from "node:crypto";
import { loadConfig, type Config } from "../../src/config/load.ts";
import { copyMigratedSqlite } from "./template-db.ts";
import { openDatabase, type Database } from "../../src/store/db.ts";
import { SecretBox } from "../../src/store/secrets.ts";
import { createGrants, type Grants } from "../../src/grants/index.ts";
import { createLogger } from "../../src/logger.ts";
import { createUpstreamProvider } from "../../src/upstream/create.ts";
import type { UpstreamProvider } from "../../src/upstream/provider.ts";
import type { RegisteredClient } from "../../src/grants/types.ts";
import type { PresentedClient } from "../../src/grants/ports.ts";
import type { Clock } from "../../src/lib/clock.ts";

export interface GrantsHarness {
  readonly config: Config;
  readonly database: Database;
  readonly grants: Grants;
  readonly secrets: SecretBox;
  close(): Promise<void>;
}

/**
 * `clock`: the time the grants decide by (default: the system clock), e.g. a ManualClock to move.
 * `databaseUrl`: a migrated database to use (the suite's PostgreSQL) instead of a new SQLite file.
 */
export async function grantsHarness(
  env: Record<string, string>,
  provider: UpstreamProvider,
  options: { clock?: Clock; databaseUrl?: string } = {},
): Promise<GrantsHarness> {
  const dir = mkdtempSync(path.join(tmpdir(), "mab-grants-"));
  const config = loadConfig(
    {
      PUBLIC_URL: "http://127.0.0.1:9",
      PORT: "9",
      DATABASE_URL: options.databaseUrl ?? `file:${path.join(dir, "broker.db")}`,
      SECRET_KEY: randomBytes(32).toString("base64"),
      ...env,
    },
    dir,
  );
  if (!options.databaseUrl) await copyMigratedSqlite(path.join(dir, "broker.db"));
  const database = await openDatabase(config.databaseUrl, dir);
  const secrets = new SecretBox(config.secretKey);
  const grants = createGrants({ db: database.db, config, secrets, provider, logger: createLogger("silent"), clock: options.clock });
  return {
    config,
    database,
    grants,
    secrets,
    async close() {
      await grants.usage.flush();
      await database.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A harness for grants that never call upstream (client_credentials): its provider is GitHub's,
 * pointed at a closed port, so any upstream call would fail loudly.
 */
export async function machineGrantsHarness(env: Record<string, string> = {}, options: { clock?: Clock; databaseUrl?: string } = {}): Promise<GrantsHarness> {
  const upstream = {
    UPSTREAM_PROVIDER: "github",
    ALLOW_ANY_USER: "true",
    // ALLOW_ANY_USER admits people only; machine clients are admitted by name.
    ALLOWED_USERS: "client:*",
    UPSTREAM_CLIENT_ID: "x",
    UPSTREAM_CLIENT_SECRET: "y",
    GITHUB_URL: "http://127.0.0.1:1",
    GITHUB_API_URL: "http://127.0.0.1:1",
  };
  const provider = createUpstreamProvider(loadConfig({ ...upstream, SECRET_KEY: "a".repeat(64) }).upstream, {});
  return grantsHarness({ ...upstream, ...env }, provider, options);
}

/** Inserts a client row the way the registry stores it (the registry itself is tested over HTTP). */
export async function insertClient(database: Database, overrides: Partial<RegisteredClient> = {}): Promise<RegisteredClient> {
  const client: RegisteredClient = {
    id: `mab_c_${randomUUID()}`,
    redirectUris: ["http://127.0.0.1:7777/callback"],
    tokenEndpointAuthMethod: "client_secret_basic",
    fallbackAuthMethod: null,
    jwksUri: null,
    jwks: null,
    signingAlg: null,
    grantTypes: ["client_credentials"],
    responseTypes: [],
    scope: null,
    clientName: "Test service",
    clientUri: null,
    logoUri: null,
    softwareId: null,
    softwareVersion: null,
    applicationType: null,
    registrationType: "manual",
    createdAt: new Date(),
    lastUsedAt: null,
    ...overrides,
  };
  await database.db.client.create({
    data: {
      id: client.id,
      secretHash: "unused-in-domain-tests",
      redirectUris: JSON.stringify(client.redirectUris),
      tokenEndpointAuthMethod: client.tokenEndpointAuthMethod,
      grantTypes: JSON.stringify(client.grantTypes),
      responseTypes: JSON.stringify(client.responseTypes),
      clientName: client.clientName,
      registrationType: client.registrationType,
    },
  });
  return client;
}

/**
 * A client as the token endpoint hands it to the grants code, its credentials taken as checked
 * (client authentication is tested over HTTP): the registry's row is still looked up, so an
 * unknown client fails as it would there.
 */
export function presented(client: RegisteredClient): PresentedClient {
  return {
    clientId: client.id,
    async authenticate(known) {
      if (!known) throw new Error(`no client ${client.id} in the registry`);
      return known.client;
    },
  };
}
