// What every configuration module shares: the one-line error naming a variable, and how a
// comma-separated list variable is read.

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
