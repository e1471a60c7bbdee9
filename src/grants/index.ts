// Assembles the grants services around one context. Nothing here knows about HTTP.
import type { Config } from "../config/load.ts";
import { serverByResource } from "../config/catalogue.ts";
import type { Logger } from "../logger.ts";
import { hotStoreOf, type Db } from "../store/db.ts";
import type { HotStore } from "../store/hot-store.ts";
import type { SecretBox } from "../store/secrets.ts";
import { purposeKey } from "../crypto/keys.ts";
import type { UpstreamProvider } from "../upstream/provider.ts";
import { systemClock, dateOf, type Clock } from "../lib/clock.ts";
import { RevocationBus, type GrantsContext } from "./context.ts";
import { GrantLifecycle } from "./lifecycle.ts";
import { UpstreamSessions } from "./upstream-sessions.ts";
import { UsageRecorder } from "./usage-recorder.ts";
import { AccessValidator } from "./access-validation.ts";
import { ClientRegistry } from "./clients.ts";
import { AuthorizationTransactions } from "./transactions.ts";
import { Consents } from "./consents.ts";
import { createTokenIssuer } from "./token/index.ts";
import type { TokenIssuer } from "./ports.ts";
import { UpstreamLogin } from "./upstream-login.ts";
import { sweep, type SweepOptions, type SweepResult } from "./sweep.ts";
import { RevocationFeed } from "./revocation-feed.ts";
import { AccessPolicy } from "./policy.ts";
import { BrowserIdentities } from "./browser-identities.ts";
import { AccountSignIn } from "./account-sign-in.ts";
import { ConnectedApps } from "./connected-apps.ts";
import { MetadataDocuments } from "./metadata-documents.ts";
import { createGuardedFetcher, type JsonFetcher } from "../outbound/guarded-fetch.ts";
import { createRateBuckets } from "../store/rate-buckets.ts";
import { RateLimiter, REGISTRATION_RATE_LIMIT } from "./rate-limit.ts";
import { ClientKeys } from "./client-keys.ts";
import { ClientAssertions } from "./client-assertion.ts";
import { ClientAuthentication } from "./client-authentication.ts";
import { Connections } from "./connections.ts";
import { ConnectFlow } from "./connect-flow.ts";
import { SigningKeys } from "./signing-keys.ts";

export interface Grants {
  readonly context: GrantsContext;
  readonly bus: RevocationBus;
  readonly lifecycle: GrantLifecycle;
  readonly sessions: UpstreamSessions;
  readonly usage: UsageRecorder;
  readonly validator: AccessValidator;
  readonly clients: ClientRegistry;
  /** Client authentication at the token, revocation and introspection endpoints. */
  readonly clientAuthentication: ClientAuthentication;
  readonly transactions: AuthorizationTransactions;
  readonly consents: Consents;
  readonly tokens: TokenIssuer;
  readonly upstreamLogin: UpstreamLogin;
  readonly revocationFeed: RevocationFeed;
  readonly browserIdentities: BrowserIdentities;
  /** The connected-apps page: its upstream sign-in and CSRF tokens, and the user's grants. */
  readonly accountSignIn: AccountSignIn;
  readonly connectedApps: ConnectedApps;
  /** Connected accounts: the users' own tokens at the services of `connections`, and connecting them. */
  readonly connections: Connections;
  readonly connectFlow: ConnectFlow;
  /** The broker's signing keys (X-Auth-Assertion, /.well-known/jwks.json); token exchange verifies with them. */
  readonly signingKeys: SigningKeys;
  /** Dynamic registrations per client address, counted in the database (shared by every instance). */
  readonly registrationLimit: RateLimiter;
  sweep(options?: Partial<SweepOptions>): Promise<SweepResult>;
}

export interface GrantsInput {
  readonly db: Db;
  /** The per-token statements; by default the hot store opened with `db`. */
  readonly hot?: HotStore | undefined;
  readonly config: Config;
  readonly secrets: SecretBox;
  readonly provider: UpstreamProvider;
  readonly logger: Logger;
  /** The time every grants decision reads (default: the system clock). */
  readonly clock?: Clock | undefined;
  /**
   * Fetches what clients publish: Client ID Metadata Documents and private_key_jwt key sets
   * (default: the guarded fetch the configuration sets up).
   */
  readonly documentFetcher?: JsonFetcher | undefined;
}

/** The client registry, and how a client proves who it is at /token, /revoke and /introspect. */
function clientServices(context: GrantsContext, fetcher: JsonFetcher): { clients: ClientRegistry; clientAuthentication: ClientAuthentication } {
  const { db, config, clock } = context;
  const clients = new ClientRegistry(db, clock, new MetadataDocuments(db, config.clients.cimd, fetcher, clock), context.hot, {
    max: config.unusedRegistrations.max,
    logger: context.logger,
  });
  // The endpoints as oauth/metadata.ts advertises them: an assertion's aud names one of them or the issuer.
  const issuer = config.publicUrl;
  const endpoints = { token: `${issuer}/token`, revocation: `${issuer}/revoke`, introspection: `${issuer}/introspect` };
  const clientAuthentication = new ClientAuthentication(
    clients,
    new ClientAssertions(new ClientKeys(fetcher, clock), context.hot, clock, { issuer, tokenEndpoint: endpoints.token }),
    endpoints,
  );
  return { clients, clientAuthentication };
}

/** One sweep with the configured retentions (a caller's options win). */
function sweepNow(context: GrantsContext, lifecycle: GrantLifecycle, clients: ClientRegistry, options?: Partial<SweepOptions>): Promise<SweepResult> {
  const { config } = context;
  return sweep(context.db, lifecycle, {
    now: dateOf(context.clock),
    // A session binding outlives no grant: the longest a grant lives bounds it.
    mcpSessionMaxAgeSeconds: config.sessionMaxAgeSeconds,
    retainAuditSeconds: config.auditRetentionDays * 86400,
    retainDeadSeconds: config.deadGrantRetentionDays * 86400,
    unusedClientSeconds: config.unusedRegistrations.lifetimeSeconds,
    evictedClients: clients.takeEvicted(),
    ...options,
  });
}

export function createGrants({ clock = systemClock, documentFetcher, hot, ...input }: GrantsInput): Grants {
  const context: GrantsContext = {
    ...input,
    hot: hot ?? hotStoreOf(input.db),
    clock,
    rotationKey: purposeKey(input.config.secretKey, "refresh-rotation/v1"),
    policy: new AccessPolicy(input.config.accessPolicy),
  };
  const browserIdentities = new BrowserIdentities(input.db, clock);
  const bus = new RevocationBus((revocation) => context.hot.announceRevocation(revocation));
  const lifecycle = new GrantLifecycle(context, bus);
  const sessions = new UpstreamSessions(context, lifecycle);
  const usage = new UsageRecorder(context);
  const connections = new Connections(context, lifecycle, (sessionId) => sessions.tokensOf(sessionId));
  const signingKeys = new SigningKeys(input.db, input.secrets, clock);
  const validator = new AccessValidator(context, sessions, usage, bus, connections);
  const fetcher = documentFetcher ?? createGuardedFetcher({ allowPrivateNetworks: input.config.clients.cimd.allowPrivateNetworks });
  const { clients, clientAuthentication } = clientServices(context, fetcher);
  const transactions = new AuthorizationTransactions(input.db, purposeKey(input.config.secretKey, "consent-csrf/v1"), clock);
  const consents = new Consents(input.db, clock, (resource) => serverByResource(input.config.catalogue, resource)?.scopes.implies ?? {});
  return {
    context,
    bus,
    lifecycle,
    sessions,
    usage,
    validator,
    clients,
    clientAuthentication,
    transactions,
    consents,
    tokens: createTokenIssuer({ ...context, clients, lifecycle, sessions, validator, bus, connections, signingKeys }),
    upstreamLogin: new UpstreamLogin(context, sessions, browserIdentities, transactions, consents, connections),
    browserIdentities,
    accountSignIn: new AccountSignIn(context, browserIdentities, purposeKey(input.config.secretKey, "account-csrf/v1")),
    connectedApps: new ConnectedApps(context, lifecycle),
    connections,
    connectFlow: new ConnectFlow(context, connections),
    signingKeys,
    revocationFeed: new RevocationFeed(context, bus),
    registrationLimit: new RateLimiter(createRateBuckets(input.db), REGISTRATION_RATE_LIMIT, {
      purpose: "register",
      hashKey: purposeKey(input.config.secretKey, "rate-limit-keys/v1"),
      clock,
      logger: input.logger,
    }),
    sweep: (options) => sweepNow(context, lifecycle, clients, options),
  };
}
