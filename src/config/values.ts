// What every configuration module shares: the one-line error naming a variable, how a
// comma-separated list variable is read, and which hosts are this machine's own.

export type Env = Record<string, string | undefined>;

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`${variable}: ${message}`);
    this.name = "ConfigError";
  }
}

/** `a, b,,c` → ["a", "b", "c"]. */
export function commaList(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(",")
    .map((v) => v.trim())
    .filter(Boolean);
}

/** The identity providers the broker signs users in at. */
export type UpstreamKind = "github" | "google" | "oidc" | "demo";
const loopbackHosts = new Set(["localhost", "127.0.0.1", "[::1]", "::1"]);
export function isLoopbackHost(hostname: string): boolean {
  return loopbackHosts.has(hostname.toLowerCase()) || /^127(\.\d{1,3}){3}$/.test(hostname);
}
