// The environment variables of the outside contract (the shared contract file), parsed once at start into a typed, frozen object.
// Every problem is reported as one line naming the variable and what it expects.
import { accessSync, constants, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import path from "node:path";
import { randomBytes } from "node:crypto";
import { parse as parseDotenv } from "dotenv";
import { z } from "zod";
import { databaseKindOf, type DatabaseKind } from "../store/database-kind.ts";
import { type AccessPolicyConfig, parseAccessPolicy, POLICY_VARIABLES } from "./access-policy.ts";
import { type AllowedOrigins, type ClientInteropConfig, parseAllowedOrigins, parseClientInterop } from "./client-interop.ts";
import { ConfigError, commaList, isLoopbackHost, isPlainHttpUrl, type Env, type UpstreamKind } from "./values.ts";
export type { UpstreamKind };
import { withSecretFiles } from "./sources.ts";
import { parseStdioLimits, parseStdioServer, STDIO_LIMIT_VARIABLES, type StdioServerConfig } from "./stdio-server.ts";
import { ConfigFileError, loadCatalogueFile, replacedVariable, type CatalogueFileContext } from "./file.ts";
import { parseObservability, type ObservabilityConfig } from "./observability.ts";
import { defaultServer, LiveCatalogue, type Catalogue, type McpBackend, type McpServerEntry } from "./catalogue.ts";

export { ConfigError };

/** Demo mode cannot write its data folder; the message says which and what to do. */
export class DataFolderError extends Error {}

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

/** The catalogue of one the environment describes: the server of MCP_SERVER_URL / MCP_SERVER_COMMAND (or the demo's) at /mcp. */
function environmentCatalogue(input: {
  readonly resourceUrl: string;
  readonly resourceName: string;
  readonly mcpServerUrl: string | undefined;
  readonly stdioServer: StdioServerConfig | undefined;
  readonly forwardUpstreamToken: boolean;
  readonly scopes: McpServerEntry["scopes"];
}): Catalogue {
  const backend: McpBackend = input.mcpServerUrl
    ? { kind: "http", url: input.mcpServerUrl }
    : input.stdioServer
      ? { kind: "stdio", server: input.stdioServer }
      : { kind: "demo" };
  const entry: McpServerEntry = {
    name: "mcp",
    title: input.resourceName,
    description: undefined,
    path: "/mcp",
    resourceUrl: input.resourceUrl,
    isDefault: true,
    backend,
    forwardUpstreamToken: input.forwardUpstreamToken,
    scopes: input.scopes,
    access: undefined,
    tools: [],
  };
  return Object.freeze({ servers: Object.freeze([Object.freeze(entry)]), source: { kind: "environment" } as const });
}

/** The file's catalogue; MCP_STDIO_* beside a file without a stdio server would be ignored, so they are refused. */
function fileCatalogue(env: Env, context: CatalogueFileContext): Catalogue {
  const catalogue = loadCatalogueFile(context);
  const unused = STDIO_LIMIT_VARIABLES.find((name) => env[name]?.trim());
  if (unused && !catalogue.servers.some((s) => s.backend.kind === "stdio"))
    throw new ConfigError(unused, `only applies to stdio MCP servers, and ${context.file} lists none (a server with command): remove it`);
  return catalogue;
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
  .refine(isPlainHttpUrl)
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

/** The user the broker runs as, for messages. */
function runningAs(): string {
  try {
    return `user ${userInfo().username}`;
  } catch {
    return `uid ${process.getuid?.() ?? "?"}`;
  }
}

/**
 * Why files cannot be created in `dir` by this process: the error code of the folder, or of the
 * nearest one above it that exists (where it would be made); undefined when they can.
 */
export function folderWriteFailure(dir: string): string | undefined {
  let existing = dir;
  while (!existsSync(existing) && path.dirname(existing) !== existing) existing = path.dirname(existing);
  try {
    accessSync(existing, constants.W_OK);
    return undefined;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code ?? "EACCES";
  }
}

/**
 * Why demo mode cannot keep its files (generated key, SQLite database) in `dataDir`, said like the
 * read-only database: which folder, and what to do. Undefined when it can (the folder, or the
 * nearest one above it that exists, is writable).
 */
export function dataFolderProblem(dataDir: string, err?: NodeJS.ErrnoException): string | undefined {
  const code = err ? (err.code ?? err.message) : folderWriteFailure(dataDir);
  if (code === undefined) return undefined;
  return `cannot create or write the data folder ${dataDir} (${code}), where demo mode keeps its generated key and its database: start the broker in a folder ${runningAs()} can write, or create ${dataDir} writable for that user`;
}

function loadOrCreateDemoSecret(dataDir: string): Buffer {
  const file = path.join(dataDir, "secret.key");
  if (existsSync(file)) {
    const key = decodeSecretKey(readFileSync(file, "utf8").trim());
    if (!key) throw new ConfigError("SECRET_KEY", `the demo key file ${file} is corrupt; delete it and start again`);
    return key;
  }
  const key = randomBytes(32);
  try {
    mkdirSync(dataDir, { recursive: true });
    writeFileSync(file, `${key.toString("base64")}\n`, { mode: 0o600 });
  } catch (err) {
    const problem = dataFolderProblem(dataDir, err as NodeJS.ErrnoException);
    throw new DataFolderError(problem!);
  }
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
  const allowInsecurePublicUrl = parseVar(env, "INSECURE_PUBLIC_URL", bool(false), "true or false");
  const insecurePublicUrl = publicUrlParsed.protocol !== "https:" && !isLoopbackHost(publicUrlParsed.hostname);
  if (insecurePublicUrl && !allowInsecurePublicUrl) {
    throw new ConfigError(
      "PUBLIC_URL",
      `expected an https:// URL (plain http is allowed only for localhost/127.0.0.1), got ${JSON.stringify(publicUrlRaw)}; put a TLS reverse proxy in front (README: "Behind a reverse proxy"), or set INSECURE_PUBLIC_URL=true to try it on a LAN without TLS`,
    );
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

  // The catalogue's file, when there is one, replaces the variables of the environment's one server.
  const configFile = parseVar(env, "BROKER_CONFIG", z.string().optional(), "the path of the YAML configuration file, e.g. ./broker.yaml");
  const environmentForwardsToken = parseVar(env, "FORWARD_UPSTREAM_TOKEN", bool(false), "true or false");
  const replaced = configFile === undefined ? undefined : replacedVariable(env, configFile, environmentForwardsToken);
  if (replaced) throw replaced;
  const environmentUrl = parseVar(
    env,
    "MCP_SERVER_URL",
    httpUrl.optional(),
    "the absolute http(s) URL of the MCP server to protect, e.g. http://127.0.0.1:8080/mcp",
  );
  // Without a file, the stdio variables are checked with MCP_SERVER_COMMAND; beside one, MCP_STDIO_*
  // are the limits of the file's stdio servers.
  const environmentStdio = configFile === undefined ? parseStdioServer(env, cwd) : undefined;
  const stdioLimits = configFile === undefined ? undefined : parseStdioLimits(env);

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
  const deadGrantRetentionDays = parseVar(env, "DEAD_GRANT_RETENTION_DAYS", intIn(0, 36500, 7), "a whole number of days between 0 and 36500");
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
  const unusedRegistrations = {
    max: parseVar(env, "DYNAMIC_REGISTRATION_MAX_UNUSED", intIn(1, 10_000_000, 10_000), "a whole number between 1 and 10000000"),
    // At least a sign-in's time (an authorization waits 10 minutes for its user); an hour by default,
    // far less than a day of a registration flood.
    lifetimeSeconds: parseVar(env, "DYNAMIC_REGISTRATION_UNUSED_SECONDS", intIn(600, 30 * 86400, 3600), "a whole number of seconds between 600 and 2592000"),
  };
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

  const environmentResourceName =
    parseVar(env, "RESOURCE_NAME", z.string().trim().min(1).max(80).optional(), "a short name of 1 to 80 characters, e.g. Acme Docs") ?? publicUrlParsed.host;
  // Before demo mode keeps a key: a file with mistakes stops the start with nothing written.
  const catalogue =
    configFile !== undefined && stdioLimits !== undefined
      ? fileCatalogue(env, { file: configFile, cwd, env, publicUrl, provider, stdioLimits })
      : environmentCatalogue({
          resourceUrl: `${publicUrl}/mcp`,
          resourceName: environmentResourceName,
          mcpServerUrl: environmentUrl,
          stdioServer: environmentStdio,
          forwardUpstreamToken: environmentForwardsToken,
          scopes: clients.scopes,
        });
  // The fields of one server mean the entry at /mcp (or the first): what the code written for one
  // server reads until it reads the catalogue.
  const main = defaultServer(catalogue) ?? catalogue.servers[0]!;
  const mcpServerUrl = main.backend.kind === "http" ? main.backend.url : undefined;
  const stdioServer = main.backend.kind === "stdio" ? main.backend.server : undefined;
  const resourceUrl = main.resourceUrl;
  const resourceName = main.title;
  const forwardUpstreamToken = main.forwardUpstreamToken;

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
    resourceUrl,
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
    deadGrantRetentionDays,
    observability: Object.freeze(observability),
    secretKey,
    previousSecretKeys,
    dynamicRegistration,
    unusedRegistrations,
    clients: Object.freeze(clients),
    allowedOrigins: Object.freeze(allowedOrigins),
    forwardUpstreamToken,
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
