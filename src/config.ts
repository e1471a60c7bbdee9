// The environment variables of the outside contract (the shared contract file), parsed once at start into a typed, frozen object.
// Every problem is reported as one line naming the variable and what it expects.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { parse as parseDotenv } from "dotenv";
import { z } from "zod";
import { databaseKindOf, type DatabaseKind } from "./store/database-kind.ts";
import { type AccessPolicyConfig, parseAccessPolicy } from "./access-policy-config.ts";
import { type AllowedOrigins, type ClientInteropConfig, parseAllowedOrigins, parseClientInterop } from "./client-interop-config.ts";
import { ConfigError, commaList, isLoopbackHost, type Env } from "./config-values.ts";
import { withSecretFiles } from "./config-sources.ts";
import { parseStdioServer, type StdioServerConfig } from "./stdio-server-config.ts";
import { parseObservability, type ObservabilityConfig } from "./observability-config.ts";

export { ConfigError };

export type UpstreamKind = "github" | "google" | "oidc" | "demo";

export interface Config {
  readonly port: number;
  readonly host: string;
  /** The issuer and base of every advertised URL, without trailing slash. */
  readonly publicUrl: string;
  /** Canonical URI of the protected MCP endpoint (PUBLIC_URL/mcp). */
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
  /** OpenTelemetry traces (OTEL_*) and the audit stream (AUDIT_SINK). */
  readonly observability: ObservabilityConfig;
  /** Raw key material (>= 32 bytes) for cookies and encryption at rest. */
  readonly secretKey: Buffer;
  /** Keys that were rotated out: still accepted for reading old rows and cookies. */
  readonly previousSecretKeys: readonly Buffer[];
  readonly dynamicRegistration: boolean;
  /** App-scheme redirects, Client ID Metadata Documents, scopes (ALLOW_APP_SCHEME_REDIRECTS, CIMD*, SCOPE*). */
  readonly clients: ClientInteropConfig;
  /** ALLOWED_ORIGINS: browser origins besides PUBLIC_URL's that may call /mcp (demo mode: loopback ones). */
  readonly allowedOrigins: AllowedOrigins;
  readonly forwardUpstreamToken: boolean;
  readonly logLevel: string;
  /** LOG_FORMAT: pretty (readable lines) or json; undefined: pretty on a terminal, else json. */
  readonly logFormat: "pretty" | "json" | undefined;
  readonly proxyTimeoutMs: number;
  /** METRICS_PORT: /metrics on its own listener on 127.0.0.1 (0: any free port). */
  readonly metricsPort: number | undefined;
  /** METRICS_TOKEN: the bearer token /metrics requires (on the main listener, and on METRICS_PORT's if both are set). */
  readonly metricsToken: string | undefined;
  readonly allowDemoOnPublicHost: boolean;
  readonly trustProxy: boolean;
  readonly dataDir: string;
}

/** Where the upstream IdP sends the browser back, relative to PUBLIC_URL. */
export const callbackPath = "/oauth/callback";

/** The redirect URI registered at the upstream IdP (GitHub, Google…): PUBLIC_URL/oauth/callback. */
export function callbackUrl(publicUrl: string): string {
  return `${publicUrl}${callbackPath}`;
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
 * Every configuration problem at once, not only the first: each offending variable is set aside
 * and the rest read again. Nothing is written (no demo key). Empty when the configuration loads.
 */
export function configProblems(env: Env, cwd: string): ConfigError[] {
  const problems: ConfigError[] = [];
  let remaining: Env = { ...env };
  for (let pass = 0; pass < 64; pass++) {
    try {
      loadConfig(remaining, cwd, { createDemoSecret: false });
      return problems;
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      // Setting aside a secret's _FILE variable only makes the secret missing: the same problem again.
      const echo = problems.some((p) => p.message === err.message || p.variable === `${err.variable}_FILE`);
      if (!echo) problems.push(err);
      // A variable that is missing cannot be set aside: the problems after it stay unknown.
      if (echo || remaining[err.variable] === undefined) return problems;
      const { [err.variable]: _, ...rest } = remaining;
      remaining = rest;
    }
  }
  return problems;
}

/** Reads `.env` in cwd if present; real environment variables win over it. */
export function readEnvironment(cwd: string, env: Env = process.env): Env {
  const file = path.join(cwd, ".env");
  if (!existsSync(file)) return { ...env };
  const fromFile = parseDotenv(readFileSync(file));
  return { ...fromFile, ...env };
}

function parseVar<T>(env: Env, name: string, schema: z.ZodType<T>, expectation: string): T {
  const raw = env[name];
  const value = raw === undefined || raw.trim() === "" ? undefined : raw.trim();
  const result = schema.safeParse(value);
  if (!result.success) {
    const got = value === undefined ? "it is not set" : `got ${JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value)}`;
    throw new ConfigError(name, `expected ${expectation}, ${got}`);
  }
  return result.data;
}

const intIn = (min: number, max: number, fallback: number) =>
  z
    .string()
    .regex(/^\d+$/)
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .optional()
    .transform((v) => v ?? fallback);

const bool = (fallback: boolean) =>
  z
    .enum(["true", "false", "1", "0", "yes", "no", "TRUE", "FALSE"])
    .optional()
    .transform((v) => (v === undefined ? fallback : ["true", "1", "yes", "TRUE"].includes(v)));

const httpUrl = z
  .string()
  .refine((v) => {
    try {
      const u = new URL(v);
      return (u.protocol === "http:" || u.protocol === "https:") && !u.hash && !u.search;
    } catch {
      return false;
    }
  })
  .transform((v) => v.replace(/\/+$/, ""));

/** Decodes SECRET_KEY given as hex or base64/base64url; null when neither yields 32+ bytes. */
export function decodeSecretKey(value: string): Buffer | null {
  if (/^[0-9a-fA-F]+$/.test(value) && value.length % 2 === 0) {
    const hex = Buffer.from(value, "hex");
    if (hex.length >= 32) return hex;
  }
  if (/^[A-Za-z0-9+/_-]+={0,2}$/.test(value)) {
    const b64 = Buffer.from(value.replace(/-/g, "+").replace(/_/g, "/"), "base64");
    if (b64.length >= 32) return b64;
  }
  return null;
}

const secretKeyExpectation =
  "at least 32 bytes of key material as hex (64+ hex digits) or base64 (44+ characters); generate one with: node -e \"console.log(require('crypto').randomBytes(32).toString('base64'))\"";

function loadOrCreateDemoSecret(dataDir: string): Buffer {
  const file = path.join(dataDir, "secret.key");
  if (existsSync(file)) {
    const key = decodeSecretKey(readFileSync(file, "utf8").trim());
    if (!key) throw new ConfigError("SECRET_KEY", `the demo key file ${file} is corrupt; delete it and start again`);
    return key;
  }
  mkdirSync(dataDir, { recursive: true });
  const key = randomBytes(32);
  writeFileSync(file, `${key.toString("base64")}\n`, { mode: 0o600 });
  return key;
}

/**
 * Parses the environment. Throws ConfigError (one line: variable and expectation) on the first
 * problem. In demo mode a missing SECRET_KEY is generated once and kept under the data folder.
 */
export interface LoadOptions {
  /** Demo mode without SECRET_KEY: keep the key under ./data (default), or use a throwaway one (a dry run). */
  readonly createDemoSecret?: boolean;
}

export function loadConfig(rawEnv: Env, cwd: string = process.cwd(), options: LoadOptions = {}): Config {
  const env = withSecretFiles(rawEnv, cwd);
  const port = parseVar(env, "PORT", intIn(0, 65535, 3000), "a port number between 0 and 65535");
  const host = parseVar(env, "HOST", z.string().min(1).optional(), "a listening address") ?? "127.0.0.1";

  const publicUrlRaw = parseVar(env, "PUBLIC_URL", httpUrl.optional(), "an absolute http(s) URL without query or fragment, e.g. https://mcp.example.com");
  const publicUrlParsed = new URL(publicUrlRaw ?? `http://localhost:${port}`);
  if (publicUrlParsed.protocol !== "https:" && !isLoopbackHost(publicUrlParsed.hostname)) {
    throw new ConfigError("PUBLIC_URL", `expected an https:// URL (plain http is allowed only for localhost/127.0.0.1), got ${JSON.stringify(publicUrlRaw)}`);
  }
  // The URL parser lower-cases scheme and host and drops default ports: the canonical form.
  const publicUrl = (publicUrlParsed.origin + publicUrlParsed.pathname).replace(/\/+$/, "");

  const databaseUrl =
    parseVar(
      env,
      "DATABASE_URL",
      z
        .string()
        .regex(/^(file:.+|postgres(ql)?:\/\/.+)$/i)
        .optional(),
      "a SQLite file URL (file:./data/broker.db) or a PostgreSQL URL (postgresql://user:pass@host:5432/db)",
    ) ?? "file:./data/broker.db";
  const databaseKind = databaseKindOf(databaseUrl);

  const mcpServerUrl = parseVar(
    env,
    "MCP_SERVER_URL",
    httpUrl.optional(),
    "the absolute http(s) URL of the MCP server to protect, e.g. http://127.0.0.1:8080/mcp",
  );

  const stdioServer = parseStdioServer(env, cwd);

  const clientId = parseVar(env, "UPSTREAM_CLIENT_ID", z.string().optional(), "the client id of the broker's registration at the upstream IdP");
  const clientSecret = parseVar(env, "UPSTREAM_CLIENT_SECRET", z.string().optional(), "the client secret of the broker's registration at the upstream IdP");
  const providerRaw = parseVar(env, "UPSTREAM_PROVIDER", z.enum(["github", "google", "oidc", "demo"]).optional(), "one of github, google, oidc, demo");
  let provider: UpstreamKind;
  if (providerRaw) provider = providerRaw;
  else if (clientId || clientSecret) {
    throw new ConfigError("UPSTREAM_PROVIDER", "expected one of github, google, oidc when UPSTREAM_CLIENT_ID/UPSTREAM_CLIENT_SECRET are set, it is not set");
  } else provider = "demo";
  const demoMode = provider === "demo";
  if (!demoMode) {
    if (!clientId)
      throw new ConfigError(
        "UPSTREAM_CLIENT_ID",
        `expected the client id of your ${provider} OAuth app (required when UPSTREAM_PROVIDER=${provider}), it is not set`,
      );
    if (!clientSecret)
      throw new ConfigError(
        "UPSTREAM_CLIENT_SECRET",
        `expected the client secret of your ${provider} OAuth app (required when UPSTREAM_PROVIDER=${provider}), it is not set`,
      );
  }
  const issuer = parseVar(env, "UPSTREAM_ISSUER", httpUrl.optional(), "the https URL of the OIDC issuer, e.g. https://accounts.google.com");
  if (provider === "oidc" && !issuer) {
    throw new ConfigError("UPSTREAM_ISSUER", "expected the issuer URL of your OIDC provider (required when UPSTREAM_PROVIDER=oidc), it is not set");
  }
  const githubUrl =
    parseVar(env, "GITHUB_URL", httpUrl.optional(), "the base URL of GitHub or GitHub Enterprise Server, e.g. https://github.com") ?? "https://github.com";
  const githubApiUrl = parseVar(env, "GITHUB_API_URL", httpUrl.optional(), "the GitHub API base URL, e.g. https://api.github.com") ?? "https://api.github.com";

  const upstreamRecheckSeconds = parseVar(env, "UPSTREAM_RECHECK_SECONDS", intIn(0, 86400, 30), "a whole number of seconds between 0 and 86400");
  const accessTokenTtlSeconds = parseVar(env, "ACCESS_TOKEN_TTL_SECONDS", intIn(1, 86400, 3600), "a whole number of seconds between 1 and 86400");
  const refreshTokenTtlSeconds = parseVar(env, "REFRESH_TOKEN_TTL_SECONDS", intIn(1, 31536000, 2592000), "a whole number of seconds between 1 and 31536000");
  const sessionIdleTimeoutSeconds = parseVar(
    env,
    "SESSION_IDLE_TIMEOUT_SECONDS",
    intIn(1, 31536000, 86400),
    "a whole number of seconds between 1 and 31536000",
  );
  const sessionMaxAgeSeconds = parseVar(env, "SESSION_MAX_AGE_SECONDS", intIn(1, 31536000, 2592000), "a whole number of seconds between 1 and 31536000");
  const upstreamTimeoutSeconds = parseVar(env, "UPSTREAM_TIMEOUT_SECONDS", intIn(1, 120, 5), "a whole number of seconds between 1 and 120");
  const refreshGraceSeconds = parseVar(env, "REFRESH_GRACE_SECONDS", intIn(0, 3600, 30), "a whole number of seconds between 0 and 3600");
  const auditRetentionDays = parseVar(env, "AUDIT_RETENTION_DAYS", intIn(1, 36500, 90), "a whole number of days between 1 and 36500");
  const observability = parseObservability(env, cwd);
  const proxyTimeoutSeconds = parseVar(env, "PROXY_TIMEOUT_SECONDS", intIn(1, 86400, 300), "a whole number of seconds between 1 and 86400");
  const metricsPort = parseVar(env, "METRICS_PORT", z.coerce.number().int().min(0).max(65535).optional(), "a port number between 0 and 65535");
  const metricsToken = parseVar(
    env,
    "METRICS_TOKEN",
    z.string().min(16).optional(),
    "at least 16 characters, e.g. node -e \"console.log(require('crypto').randomBytes(24).toString('base64url'))\"",
  );
  const dynamicRegistration = parseVar(env, "DYNAMIC_REGISTRATION", bool(true), "true or false");
  const forwardUpstreamToken = parseVar(env, "FORWARD_UPSTREAM_TOKEN", bool(false), "true or false");
  const clients: ClientInteropConfig = parseClientInterop(env, {
    allowAppSchemeRedirects: parseVar(env, "ALLOW_APP_SCHEME_REDIRECTS", bool(true), "true or false"),
    cimd: parseVar(env, "CIMD", bool(true), "true or false"),
    cimdAllowPrivateNetworks: parseVar(env, "CIMD_ALLOW_PRIVATE_NETWORKS", bool(false), "true or false"),
  });
  const allowedOrigins = parseAllowedOrigins(env, demoMode);
  const allowDemoOnPublicHost = parseVar(env, "DEMO_ALLOW_PUBLIC_HOST", bool(false), "true or false");
  const trustProxy = parseVar(env, "TRUST_PROXY", bool(false), "true or false");
  const logLevel =
    parseVar(
      env,
      "LOG_LEVEL",
      z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).optional(),
      "one of fatal, error, warn, info, debug, trace, silent",
    ) ?? "info";
  const logFormat = parseVar(env, "LOG_FORMAT", z.enum(["pretty", "json"]).optional(), "pretty or json");

  const dataDir = path.resolve(cwd, "data");
  let secretKey: Buffer;
  const secretRaw = env.SECRET_KEY?.trim();
  if (secretRaw) {
    const key = decodeSecretKey(secretRaw);
    if (!key) throw new ConfigError("SECRET_KEY", `expected ${secretKeyExpectation}, got a value that decodes to fewer than 32 bytes`);
    secretKey = key;
  } else if (demoMode) {
    secretKey = (options.createDemoSecret ?? true) ? loadOrCreateDemoSecret(dataDir) : randomBytes(32);
  } else {
    throw new ConfigError("SECRET_KEY", `expected ${secretKeyExpectation} (required outside demo mode), it is not set`);
  }

  const previousSecretKeys = commaList(env.SECRET_KEY_PREVIOUS).map((v) => {
    const key = decodeSecretKey(v);
    if (!key) throw new ConfigError("SECRET_KEY_PREVIOUS", `expected a comma-separated list of earlier SECRET_KEY values (${secretKeyExpectation})`);
    return key;
  });

  const allowAnyUser = parseVar(env, "ALLOW_ANY_USER", bool(false), "true or false");
  const accessPolicy: AccessPolicyConfig = parseAccessPolicy(env, provider, allowAnyUser);
  const resourceName =
    parseVar(env, "RESOURCE_NAME", z.string().trim().min(1).max(80).optional(), "a short name of 1 to 80 characters, e.g. Acme Docs") ?? publicUrlParsed.host;

  if (demoMode && !isLoopbackHost(host) && !allowDemoOnPublicHost) {
    throw new ConfigError(
      "HOST",
      `expected a loopback address in demo mode (anyone could log in as anyone), got ${JSON.stringify(host)}; configure a real UPSTREAM_PROVIDER or set DEMO_ALLOW_PUBLIC_HOST=true`,
    );
  }

  return Object.freeze({
    port,
    host,
    publicUrl,
    resourceUrl: `${publicUrl}/mcp`,
    databaseUrl,
    databaseKind,
    mcpServerUrl,
    stdioServer,
    demoMode,
    upstream: Object.freeze({
      provider,
      clientId,
      clientSecret,
      scopes: parseVar(env, "UPSTREAM_SCOPES", z.string().optional(), "space-separated scopes"),
      issuer: issuer ?? (provider === "google" ? "https://accounts.google.com" : undefined),
      displayName: parseVar(env, "UPSTREAM_DISPLAY_NAME", z.string().trim().min(1).max(60).optional(), "a short name of 1 to 60 characters, e.g. Acme SSO"),
      githubUrl,
      githubApiUrl,
      timeoutMs: upstreamTimeoutSeconds * 1000,
    }),
    accessPolicy: Object.freeze(accessPolicy),
    resourceName,
    upstreamRecheckSeconds,
    accessTokenTtlSeconds,
    refreshTokenTtlSeconds,
    sessionIdleTimeoutSeconds,
    sessionMaxAgeSeconds,
    refreshGraceSeconds,
    auditRetentionDays,
    observability: Object.freeze(observability),
    secretKey,
    previousSecretKeys,
    dynamicRegistration,
    clients: Object.freeze(clients),
    allowedOrigins: Object.freeze(allowedOrigins),
    forwardUpstreamToken,
    logLevel,
    logFormat,
    proxyTimeoutMs: proxyTimeoutSeconds * 1000,
    metricsPort,
    metricsToken,
    allowDemoOnPublicHost,
    trustProxy,
    dataDir,
  });
}
