// Where configuration values come from besides plain variables, and the mistakes an operator makes
// with names: `X_FILE` for container secrets (Docker/Kubernetes mount a secret as a file), and
// variables that look like ours but are not (`UPSTREAM_PROVIDR`), reported with the nearest name.
import { readFileSync } from "node:fs";
import path from "node:path";
import leven from "leven";
import { ConfigError, type Env } from "./values.ts";
import { firstLine } from "../lib/error-text.ts";
import { STDIO_COMPANION_VARIABLES } from "./stdio-server.ts";

/** The variables that may also be given as `<NAME>_FILE`: the secrets. */
export const FILE_VARIABLES = ["SECRET_KEY", "UPSTREAM_CLIENT_SECRET", "DATABASE_URL", "AUDIT_SINK_SECRET"] as const;

/**
 * `env` with each `<NAME>_FILE` read into `<NAME>` (one trailing newline dropped, as secret files
 * usually end with one). Both set is a mistake, and so is a file that cannot be read.
 */
export function withSecretFiles(env: Env, cwd: string): Env {
  const resolved: Env = { ...env };
  for (const name of FILE_VARIABLES) {
    const file = env[`${name}_FILE`]?.trim();
    if (!file) continue;
    if (env[name]?.trim()) throw new ConfigError(`${name}_FILE`, `set either ${name} or ${name}_FILE, not both`);
    let value: string;
    try {
      value = readFileSync(path.resolve(cwd, file), "utf8");
    } catch (err) {
      throw new ConfigError(
        `${name}_FILE`,
        `cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? firstLine(err)}): mount the secret there or correct the path`,
      );
    }
    resolved[name] = value.replace(/\r?\n$/, "");
    if (!resolved[name]) throw new ConfigError(`${name}_FILE`, `${file} is empty`);
  }
  return resolved;
}

/** Every variable the broker reads (a test checks this against the configuration modules). */
export const KNOWN_VARIABLES: readonly string[] = [
  "PORT",
  "HOST",
  "PUBLIC_URL",
  "INSECURE_PUBLIC_URL",
  "DATABASE_URL",
  "BROKER_CONFIG",
  "MCP_SERVER_URL",
  "MCP_SERVER_COMMAND",
  ...STDIO_COMPANION_VARIABLES,
  "UPSTREAM_PROVIDER",
  "UPSTREAM_CLIENT_ID",
  "UPSTREAM_CLIENT_SECRET",
  "UPSTREAM_SCOPES",
  "UPSTREAM_ISSUER",
  "UPSTREAM_DISPLAY_NAME",
  "UPSTREAM_GROUPS_CLAIM",
  "UPSTREAM_RECHECK_SECONDS",
  "UPSTREAM_TIMEOUT_SECONDS",
  "GITHUB_URL",
  "GITHUB_API_URL",
  "ALLOWED_USERS",
  "ALLOWED_EMAIL_DOMAINS",
  "ALLOWED_GITHUB_ORGS",
  "ALLOWED_GROUPS",
  "ALLOW_ANY_USER",
  "RESOURCE_NAME",
  "ACCESS_TOKEN_TTL_SECONDS",
  "REFRESH_TOKEN_TTL_SECONDS",
  "SESSION_IDLE_TIMEOUT_SECONDS",
  "SESSION_MAX_AGE_SECONDS",
  "REFRESH_GRACE_SECONDS",
  "AUDIT_RETENTION_DAYS",
  "DEAD_GRANT_RETENTION_DAYS",
  "AUDIT_SINK",
  "AUDIT_SINK_SECRET",
  "OTEL_SDK_DISABLED",
  "OTEL_TRACES_EXPORTER",
  "OTEL_EXPORTER_OTLP_ENDPOINT",
  "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
  "OTEL_EXPORTER_OTLP_HEADERS",
  "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
  "OTEL_EXPORTER_OTLP_TIMEOUT",
  "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
  "OTEL_SERVICE_NAME",
  "OTEL_RESOURCE_ATTRIBUTES",
  "OTEL_TRACES_SAMPLER",
  "OTEL_TRACES_SAMPLER_ARG",
  "OTEL_BSP_SCHEDULE_DELAY",
  "SECRET_KEY",
  "SECRET_KEY_PREVIOUS",
  "DYNAMIC_REGISTRATION",
  "DYNAMIC_REGISTRATION_MAX_UNUSED",
  "DYNAMIC_REGISTRATION_UNUSED_SECONDS",
  "ALLOW_APP_SCHEME_REDIRECTS",
  "CIMD",
  "CIMD_TRUSTED_HOSTS",
  "CIMD_ALLOW_PRIVATE_NETWORKS",
  "ALLOWED_ORIGINS",
  "SCOPES_SUPPORTED",
  "SCOPE_DESCRIPTIONS",
  "SCOPE_IMPLIES",
  "FORWARD_UPSTREAM_TOKEN",
  "LOG_LEVEL",
  "LOG_FORMAT",
  "PROXY_TIMEOUT_SECONDS",
  "METRICS_PORT",
  "METRICS_TOKEN",
  "DEMO_ALLOW_PUBLIC_HOST",
  "TRUST_PROXY",
  ...FILE_VARIABLES.map((name) => `${name}_FILE`),
];

/** Prefixes only the broker's own variables use: any unknown name with one is a mistake. */
const OWN_PREFIXES = ["UPSTREAM_", "MCP_SERVER_", "MCP_STDIO_", "ALLOWED_", "CIMD_", "SESSION_", "AUDIT_", "REFRESH_", "ACCESS_TOKEN_", "DEMO_", "METRICS_"];

export interface UnknownVariable {
  readonly name: string;
  /** The known variable it most likely means. */
  readonly nearest: string;
}

/**
 * Set variables that are not ours but look like ours: one of our prefixes, or a name a typo or two
 * away from one of ours (the rest of a process environment — HOME, PATH, CI's variables — is left
 * alone).
 */
export function unknownVariables(env: Env, known: readonly string[] = KNOWN_VARIABLES): UnknownVariable[] {
  const knownSet = new Set(known);
  const found: UnknownVariable[] = [];
  for (const name of Object.keys(env).sort()) {
    if (knownSet.has(name) || env[name] === undefined || !/^[A-Z][A-Z0-9_]*$/.test(name)) continue;
    let nearest = known[0]!;
    let distance = Number.POSITIVE_INFINITY;
    for (const candidate of known) {
      const d = leven(name, candidate);
      if (d < distance) [nearest, distance] = [candidate, d];
    }
    // A longer name tolerates more typos; a 4-letter system name (HOME) is not a typo of HOST.
    const typo = distance <= (name.length >= 8 ? 2 : name.length >= 6 ? 1 : 0);
    if (typo || OWN_PREFIXES.some((prefix) => name.startsWith(prefix))) found.push({ name, nearest });
  }
  return found;
}

/** One line per unknown variable, naming the one it likely means. */
export function describeUnknownVariable(v: UnknownVariable): string {
  return `${v.name} is not a setting of mcp-auth-broker (did you mean ${v.nearest}?)`;
}
