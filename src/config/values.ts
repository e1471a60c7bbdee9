// What every configuration module shares: the one-line error naming a variable, how a
// comma-separated list variable is read, and which hosts are this machine's own.

export type Env = Record<string, string | undefined>;

/** An environment variable's name as a program may be given one. */
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export class ConfigError extends Error {
  /** The message without the variable's name: what the configuration file reports at a key instead. */
  readonly detail: string;
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = "ConfigError";
    this.detail = message;
  }
}

/** `a, b,,c` → ["a", "b", "c"]. */
export function commaList(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(",")
    .map((v) => v.trim())
    .filter(Boolean);
}

/**
 * An absolute http(s) URL without query or fragment: what the broker calls (MCP servers, issuers)
 * and what it advertises (PUBLIC_URL). A query or fragment would be dropped or misread on the way.
 */
export function isPlainHttpUrl(value: string): boolean {
  try {
    const u = new URL(value);
    return (u.protocol === "http:" || u.protocol === "https:") && !u.hash && !u.search;
  } catch {
    return false;
  }
}

/** The identity providers the broker signs users in at. */
export type UpstreamKind = "github" | "google" | "oidc" | "demo";
const loopbackHosts = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);
export function isLoopbackHost(hostname: string): boolean {
  return loopbackHosts.has(hostname.toLowerCase()) || /^127(\.\d{1,3}){3}$/.test(hostname);
}
