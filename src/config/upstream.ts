// The identity provider users sign in at (UPSTREAM_*, GITHUB_*): which one, the broker's
// registration there, and where it is. Without any of it the broker runs in demo mode.
import { z } from "zod";
import { httpUrl, parseVar } from "./parse-var.ts";
import { ConfigError, type Env, type UpstreamKind } from "./values.ts";

export interface UpstreamRegistration {
  readonly provider: UpstreamKind;
  readonly clientId: string | undefined;
  readonly clientSecret: string | undefined;
  readonly issuer: string | undefined;
  readonly githubUrl: string;
  readonly githubApiUrl: string;
}

/** The provider named, or demo when nothing is; client id and secret set without a provider are a mistake. */
function providerOf(env: Env, clientId: string | undefined, clientSecret: string | undefined): UpstreamKind {
  const providerRaw = parseVar(env, "UPSTREAM_PROVIDER", z.enum(["github", "google", "oidc", "demo"]).optional(), "one of github, google, oidc, demo");
  if (providerRaw) return providerRaw;
  if (clientId || clientSecret) {
    throw new ConfigError("UPSTREAM_PROVIDER", "expected one of github, google, oidc when UPSTREAM_CLIENT_ID/UPSTREAM_CLIENT_SECRET are set, it is not set");
  }
  return "demo";
}

export function parseUpstream(env: Env): UpstreamRegistration {
  const clientId = parseVar(env, "UPSTREAM_CLIENT_ID", z.string().optional(), "the client id of the broker's registration at the upstream IdP");
  const clientSecret = parseVar(env, "UPSTREAM_CLIENT_SECRET", z.string().optional(), "the client secret of the broker's registration at the upstream IdP");
  const provider = providerOf(env, clientId, clientSecret);
  if (provider !== "demo") {
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
  return { provider, clientId, clientSecret, issuer, githubUrl, githubApiUrl };
}

/**
 * The whole upstream section: the registration, and the scopes asked for and the name the consent
 * page shows, read after every other variable so that problems keep the order they are listed in.
 */
export function upstreamSettings(env: Env, registration: UpstreamRegistration, timeoutMs: number) {
  const { provider, clientId, clientSecret, issuer, githubUrl, githubApiUrl } = registration;
  return Object.freeze({
    provider,
    clientId,
    clientSecret,
    scopes: parseVar(env, "UPSTREAM_SCOPES", z.string().optional(), "space-separated scopes"),
    issuer: issuer ?? (provider === "google" ? "https://accounts.google.com" : undefined),
    displayName: parseVar(env, "UPSTREAM_DISPLAY_NAME", z.string().trim().min(1).max(60).optional(), "a short name of 1 to 60 characters, e.g. Acme SSO"),
    githubUrl,
    githubApiUrl,
    timeoutMs,
  });
}
