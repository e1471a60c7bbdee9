// The domain services of one broker, built from its configuration. Shared by the server
// (broker.ts) and the operator CLI so both act on grants the same way.
import type { Config } from "./config/load.ts";
import type { Logger } from "./logger.ts";
import type { Database } from "./store/db.ts";
import { SecretBox } from "./store/secrets.ts";
import { purposeKey } from "./crypto/keys.ts";
import { createGrants, type Grants } from "./grants/index.ts";
import { narrowingRules } from "./grants/server-access.ts";
import type { ClientRegistry } from "./grants/clients.ts";
import { createGrantListing, type GrantListing } from "./grants/grant-listing.ts";
import { readAuditLog, readAuditLogForward, type AuditFilter, type AuditRecord } from "./grants/audit-log.ts";
import { createUpstreamProvider } from "./upstream/create.ts";
import type { UpstreamProvider } from "./upstream/provider.ts";
import { systemClock, type Clock } from "./lib/clock.ts";
import type { SigningKeys } from "./grants/signing-keys.ts";
import { IdentityAssertions } from "./grants/identity-assertion.ts";
import type { JsonFetcher } from "./outbound/guarded-fetch.ts";
import { activeTracer } from "./telemetry/span.ts";
import { tracedProvider } from "./upstream/traced.ts";

export interface Services {
  readonly secrets: SecretBox;
  readonly provider: UpstreamProvider;
  readonly grants: Grants;
  /** The registry of MCP clients (registration, lookup, removal): the one the grants use. */
  readonly clients: ClientRegistry;
  /** Grants as the operator lists them. */
  readonly grantListing: GrantListing;
  /** The audit trail, as the operator reads it: the newest events, or (following it) the next ones. */
  readonly auditLog: { read(filter: AuditFilter): Promise<AuditRecord[]>; readForward(filter: AuditFilter): Promise<AuditRecord[]> };
  /** The broker's signing keys (published at /.well-known/jwks.json). */
  readonly signingKeys: SigningKeys;
  /** The signed word on who the caller is, for MCP servers (X-Auth-Assertion). */
  readonly assertions: IdentityAssertions;
}

/** Where demo mode serves its embedded identity provider. */
export function demoIssuerUrl(config: Config): string {
  return `${config.publicUrl}/demo-idp`;
}

/** The broker's client secret at its own embedded demo IdP: derived, so it survives restarts. */
export function demoClientSecret(config: Config): string {
  return Buffer.from(purposeKey(config.secretKey, "demo-idp-client/v1")).toString("base64url");
}

export function createServices(
  config: Config,
  database: Database,
  logger: Logger,
  options: { readonly clock?: Clock | undefined; readonly documentFetcher?: JsonFetcher | undefined } = {},
): Services {
  const secrets = new SecretBox(config.secretKey, config.previousSecretKeys);
  const created = createUpstreamProvider(config.upstream, {
    demoIssuer: demoIssuerUrl(config),
    demoClientSecret: demoClientSecret(config),
    policy: config.accessPolicy,
    narrowingRules: narrowingRules(config.catalogue),
    log: logger,
  });
  const provider = activeTracer() ? tracedProvider(created) : created;
  const grants = createGrants({
    db: database.db,
    hot: database.hot,
    config,
    secrets,
    provider,
    logger,
    clock: options.clock,
    documentFetcher: options.documentFetcher,
  });
  const { signingKeys } = grants;
  return {
    secrets,
    provider,
    signingKeys,
    assertions: new IdentityAssertions(signingKeys, config.publicUrl, options.clock ?? systemClock),
    grants,
    clients: grants.clients,
    grantListing: createGrantListing(database.db),
    auditLog: { read: (filter) => readAuditLog(database.db, filter), readForward: (filter) => readAuditLogForward(database.db, filter) },
  };
}
