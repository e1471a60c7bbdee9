// The environment variables of the outside contract (the shared contract file), parsed once at start into a typed, frozen object.
// Every problem is reported as one line naming the variable and what it expects.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { parse as parseDotenv } from "dotenv";
import type { DatabaseKind } from "./database-kind.ts";
import { type AccessPolicyConfig, parseAccessPolicy, POLICY_VARIABLES } from "./access-policy.ts";
import type { AllowedOrigins, ClientInteropConfig } from "./client-interop.ts";
import { ConfigError, isLoopbackHost, type Env, type UpstreamKind } from "./values.ts";
export type { UpstreamKind };
import { withSecretFiles } from "./sources.ts";
import type { StdioServerConfig } from "./stdio-server.ts";
import { ConfigFileError } from "./file.ts";
import { parseObservability, type ObservabilityConfig } from "./observability.ts";
import { LiveCatalogue, type Catalogue } from "./catalogue.ts";
import { bool, intIn, parseVar } from "./parse-var.ts";
import { parseListener, refuseDemoOnPublicHost } from "./listener.ts";
import { parseDatabase } from "./database.ts";
import { catalogueOf, oneServerFields, parseServerSource } from "./server-source.ts";
import { parseUpstream, upstreamSettings } from "./upstream.ts";
import { parseLifetimes } from "./lifetimes.ts";
import { parseLogging, parseMetrics } from "./operations.ts";
import { parseRegistration } from "./registration.ts";
import { parseSecretKeys } from "./secret-key.ts";
export { DataFolderError, dataFolderProblem, folderWriteFailure } from "./data-folder.ts";
export { decodeSecretKey } from "./secret-key.ts";

export { ConfigError };

export interface Config {
  readonly port: number;
  readonly host: string;
  /** The issuer and base of every advertised URL, without trailing slash. */
  readonly publicUrl: string;
  /**
   * Canonical URI of the protected MCP endpoint (PUBLIC_URL/mcp). This and the other one-server
   * fields (mcpServerUrl, stdioServer, resourceName, forwardUpstreamToken) describe the catalogue's
   * default entry, or its first when none is: with a file, its resourceUrl is PUBLIC_URL/mcp/<name>.
   */
  readonly resourceUrl: string;
  readonly databaseUrl: string;
  readonly databaseKind: DatabaseKind;
  /** Undefined (and no stdioServer): the built-in demo MCP server is started and fronted. */
  readonly mcpServerUrl: string | undefined;
  /** MCP_SERVER_COMMAND and companions: a stdio MCP server, one child per MCP session. */
  readonly stdioServer: StdioServerConfig | undefined;
  readonly demoMode: boolean;
  readonly upstream: {
    readonly provider: UpstreamKind;
    readonly clientId: string | undefined;
    readonly clientSecret: string | undefined;
    readonly scopes: string | undefined;
    readonly issuer: string | undefined;
    /** UPSTREAM_DISPLAY_NAME: how the consent page names the provider (defaults per provider). */
    readonly displayName: string | undefined;
    readonly githubUrl: string;
    readonly githubApiUrl: string;
    readonly timeoutMs: number;
  };
  /** Who may sign in (ALLOWED_*, ALLOW_ANY_USER). */
  readonly accessPolicy: AccessPolicyConfig;
  /** RESOURCE_NAME: how pages and the protected resource metadata name the protected service. */
  readonly resourceName: string;
  readonly upstreamRecheckSeconds: number;
  readonly accessTokenTtlSeconds: number;
  readonly refreshTokenTtlSeconds: number;
  readonly sessionIdleTimeoutSeconds: number;
  readonly sessionMaxAgeSeconds: number;
  readonly refreshGraceSeconds: number;
  /** AUDIT_RETENTION_DAYS: how long audit events are kept before the sweep removes them. */
  readonly auditRetentionDays: number;
  /** DEAD_GRANT_RETENTION_DAYS: how long a revoked or expired grant's rows are kept (for /account and the CLI). */
  readonly deadGrantRetentionDays: number;
  /** OpenTelemetry traces (OTEL_*) and the audit stream (AUDIT_SINK). */
  readonly observability: ObservabilityConfig;
  /** Raw key material (>= 32 bytes) for cookies and encryption at rest. */
  readonly secretKey: Buffer;
  /** Keys that were rotated out: still accepted for reading old rows and cookies. */
  readonly previousSecretKeys: readonly Buffer[];
  readonly dynamicRegistration: boolean;
  /**
   * Self-registrations nobody completed a sign-in with: how many are kept at most
   * (DYNAMIC_REGISTRATION_MAX_UNUSED; the oldest go first) and how long each is kept
   * (DYNAMIC_REGISTRATION_UNUSED_SECONDS).
   */
  readonly unusedRegistrations: { readonly max: number; readonly lifetimeSeconds: number };
  /** App-scheme redirects, Client ID Metadata Documents, scopes (ALLOW_APP_SCHEME_REDIRECTS, CIMD*, SCOPE*). */
  readonly clients: ClientInteropConfig;
  /** ALLOWED_ORIGINS: browser origins besides PUBLIC_URL's that may call /mcp (demo mode: loopback ones). */
  readonly allowedOrigins: AllowedOrigins;
  readonly forwardUpstreamToken: boolean;
  /**
   * The MCP servers fronted (config/catalogue.ts). From the environment alone: one entry, at /mcp,
   * made of the fields above (mcpServerUrl or stdioServer, resourceUrl, resourceName, scopes). From
   * BROKER_CONFIG: the file's servers (config/file.ts).
   */
  readonly catalogue: Catalogue;
  readonly logLevel: string;
  /** LOG_FORMAT: pretty (readable lines) or json; undefined: pretty on a terminal, else json. */
  readonly logFormat: "pretty" | "json" | undefined;
  readonly proxyTimeoutMs: number;
  /** METRICS_PORT: /metrics on its own listener on 127.0.0.1 (0: any free port). */
  readonly metricsPort: number | undefined;
  /** METRICS_TOKEN: the bearer token /metrics requires (on the main listener, and on METRICS_PORT's if both are set). */
  readonly metricsToken: string | undefined;
  readonly allowDemoOnPublicHost: boolean;
  /** INSECURE_PUBLIC_URL=true in effect: PUBLIC_URL is plain http on a non-loopback host (warned at every start). */
  readonly insecurePublicUrl: boolean;
  readonly trustProxy: boolean;
  readonly dataDir: string;
}

/** Where the upstream IdP sends the browser back, relative to PUBLIC_URL. */
export const callbackPath = "/oauth/callback";

/** The redirect URI registered at the upstream IdP (GitHub, Google…): PUBLIC_URL/oauth/callback. */
export function callbackUrl(publicUrl: string): string {
  return `${publicUrl}${callbackPath}`;
}

export const connectCallbackPath = "/oauth/connect/callback";

/** The redirect URI registered at each connected-account service: PUBLIC_URL/oauth/connect/callback. */
export function connectCallbackUrl(publicUrl: string): string {
  return `${publicUrl}${connectCallbackPath}`;
}

export { isLoopbackHost };

/**
 * Outside demo mode the operator must say what is protected: fronting the built-in demo MCP
 * server in production because MCP_SERVER_URL was forgotten would be a silent mistake.
 */
export function missingMcpServer(config: Config, servesInProcess = false): ConfigError | undefined {
  if (config.demoMode || config.mcpServerUrl || config.stdioServer || servesInProcess) return undefined;
  return new ConfigError(
    "MCP_SERVER_URL",
    "outside demo mode, say which MCP server to protect: set MCP_SERVER_URL to its Streamable HTTP endpoint (e.g. http://127.0.0.1:8080/mcp), or MCP_SERVER_COMMAND to run a stdio server",
  );
}

/**
 * What a required variable that is not set is replaced with while the rest is read, so that the
 * problems after it are found too. A stand-in is never used to run anything: what depends on it
 * is not probed (ConfigInspection.unsettled).
 */
const STAND_INS: Readonly<Record<string, Env>> = {
  SECRET_KEY: { SECRET_KEY: "0".repeat(64) },
  UPSTREAM_CLIENT_ID: { UPSTREAM_CLIENT_ID: "(not set)" },
  UPSTREAM_CLIENT_SECRET: { UPSTREAM_CLIENT_SECRET: "(not set)" },
  UPSTREAM_ISSUER: { UPSTREAM_ISSUER: "https://issuer.invalid" },
  // Nobody admitted: the rest is read as if anyone were.
  ALLOWED_USERS: { ALLOW_ANY_USER: "true" },
};

export interface ConfigInspection {
  /** Every problem, in the order found; empty when the configuration loads as it is. */
  readonly problems: readonly ConfigError[];
  /** The configuration read with the offending variables set aside or stood in for, when that loads. */
  readonly config: Config | undefined;
  /** The variables set aside or stood in for: what depends on them cannot be checked. */
  readonly unsettled: ReadonlySet<string>;
}

/**
 * Every configuration problem at once, not only the first: each offending variable is set aside
 * (or, when a required one is missing, stood in for) and the rest read again. Nothing is written
 * (no demo key). Includes the missing MCP server outside demo mode.
 */
export function inspectConfig(env: Env, cwd: string): ConfigInspection {
  const problems: ConfigError[] = [];
  const unsettled = new Set<string>();
  const stoodIn = new Set<string>();
  let remaining: Env = { ...env };
  for (let pass = 0; pass < 64; pass++) {
    try {
      const config = loadConfig(remaining, cwd, { createDemoSecret: false });
      // A file set aside for its mistakes named the servers: none is missing.
      const missing = unsettled.has("BROKER_CONFIG") ? undefined : missingMcpServer(config);
      if (missing) problems.push(missing);
      return { problems, config, unsettled };
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      if (err instanceof ConfigFileError) {
        // Each mistake of the file on its own line, with its place; the rest read without the file.
        problems.push(...err.problems);
        unsettled.add(err.variable);
        const { BROKER_CONFIG: _, ...rest } = remaining;
        remaining = rest;
        continue;
      }
      // A variable set aside may leave its neighbour missing (an unreadable SECRET_KEY_FILE: no
      // SECRET_KEY; an invalid ALLOWED_USERS: nobody admitted): the same problem, said once.
      const echo = problems.some(
        (p) =>
          p.variable === err.variable ||
          p.variable === `${err.variable}_FILE` ||
          p.message === err.message ||
          (err.variable === "ALLOWED_USERS" && (POLICY_VARIABLES as readonly string[]).includes(p.variable)),
      );
      if (!echo) problems.push(err);
      unsettled.add(err.variable);
      if (remaining[err.variable] !== undefined && !stoodIn.has(err.variable)) {
        const { [err.variable]: _, ...rest } = remaining;
        remaining = rest;
        continue;
      }
      const standIn = STAND_INS[err.variable];
      // Nothing to stand in with: the problems after this one stay unknown.
      if (!standIn || stoodIn.has(err.variable)) return { problems, config: undefined, unsettled };
      stoodIn.add(err.variable);
      remaining = { ...remaining, ...standIn };
    }
  }
  return { problems, config: undefined, unsettled };
}

/** Every configuration problem at once (inspectConfig's problems). */
export function configProblems(env: Env, cwd: string): ConfigError[] {
  return [...inspectConfig(env, cwd).problems];
}

/** Reads `.env` in cwd if present; real environment variables win over it. */
export function readEnvironment(cwd: string, env: Env = process.env): Env {
  const file = path.join(cwd, ".env");
  if (!existsSync(file)) return { ...env };
  const fromFile = parseDotenv(readFileSync(file));
  return { ...fromFile, ...env };
}

export interface LoadOptions {
  /** Demo mode without SECRET_KEY: keep the key under ./data (default), or use a throwaway one (a dry run). */
  readonly createDemoSecret?: boolean;
}

/**
 * Parses the environment. Throws ConfigError (one line: variable and expectation) on the first
 * problem. In demo mode a missing SECRET_KEY is generated once and kept under the data folder.
 */
export function loadConfig(rawEnv: Env, cwd: string = process.cwd(), options: LoadOptions = {}): Config {
  // Read in this order, each part throwing at its first problem: inspectConfig lists the problems
  // in the order found, and operators and tests know that order.
  const env = withSecretFiles(rawEnv, cwd);
  const { port, host, publicUrl, publicHost, insecurePublicUrl } = parseListener(env);
  const { databaseUrl, databaseKind } = parseDatabase(env);
  const source = parseServerSource(env, cwd);
  const registration = parseUpstream(env);
  const { provider } = registration;
  const demoMode = provider === "demo";
  const { upstreamTimeoutSeconds, ...lifetimes } = parseLifetimes(env);
  const observability = parseObservability(env, cwd);
  const proxyTimeoutSeconds = parseVar(env, "PROXY_TIMEOUT_SECONDS", intIn(1, 86400, 300), "a whole number of seconds between 1 and 86400");
  const { metricsPort, metricsToken } = parseMetrics(env);
  const { dynamicRegistration, unusedRegistrations, clients, allowedOrigins } = parseRegistration(env, demoMode);
  const allowDemoOnPublicHost = parseVar(env, "DEMO_ALLOW_PUBLIC_HOST", bool(false), "true or false");
  const trustProxy = parseVar(env, "TRUST_PROXY", bool(false), "true or false");
  const { logLevel, logFormat } = parseLogging(env);
  // Before demo mode keeps a key: a file with mistakes stops the start with nothing written.
  const { catalogue, main } = catalogueOf(env, source, { cwd, publicUrl, publicHost, provider, scopes: clients.scopes });
  const dataDir = path.resolve(cwd, "data");
  const { secretKey, previousSecretKeys } = parseSecretKeys(env, { demoMode, dataDir, createDemoSecret: options.createDemoSecret ?? true });
  const allowAnyUser = parseVar(env, "ALLOW_ANY_USER", bool(false), "true or false");
  const accessPolicy: AccessPolicyConfig = parseAccessPolicy(env, provider, allowAnyUser);
  refuseDemoOnPublicHost(host, demoMode, allowDemoOnPublicHost);

  return Object.freeze({
    port,
    host,
    publicUrl,
    ...oneServerFields(main),
    databaseUrl,
    databaseKind,
    demoMode,
    upstream: upstreamSettings(env, registration, upstreamTimeoutSeconds * 1000),
    accessPolicy: Object.freeze(accessPolicy),
    ...lifetimes,
    observability: Object.freeze(observability),
    secretKey,
    previousSecretKeys,
    dynamicRegistration,
    unusedRegistrations,
    clients: Object.freeze(clients),
    allowedOrigins: Object.freeze(allowedOrigins),
    // Live: a reload (SIGHUP, `mcp-auth-broker reload`) replaces what every reader sees.
    catalogue: new LiveCatalogue(catalogue),
    logLevel,
    logFormat,
    proxyTimeoutMs: proxyTimeoutSeconds * 1000,
    metricsPort,
    metricsToken,
    allowDemoOnPublicHost,
    insecurePublicUrl,
    trustProxy,
    dataDir,
  });
}
