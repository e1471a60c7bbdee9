// The one place that knows which provider implementation serves which UPSTREAM_PROVIDER.
import type { Config } from "../config/load.ts";
import type { AccessPolicyConfig } from "../config/access-policy.ts";
import { GitHubProvider } from "./github.ts";
import { OidcProvider } from "./oidc.ts";
import type { UpstreamProvider } from "./provider.ts";

export const DEMO_CLIENT_ID = "mcp-auth-broker-demo";

export interface ProviderOptions {
  /** Issuer URL of the embedded demo IdP (demo mode). */
  readonly demoIssuer?: string;
  /** The broker's client secret at the embedded demo IdP (derived from SECRET_KEY). */
  readonly demoClientSecret?: string;
  /** The access policy: which facts (org membership, groups, e-mails) the provider must read. */
  readonly policy?: AccessPolicyConfig;
  /** Where a provider notes what an operator may need to fix (e.g. an org's SAML SSO). */
  readonly log?: { warn(fields: Record<string, unknown>, message: string): void };
}

/** The scopes asked for, plus those the policy's facts need (the operator need not know them). */
function withScopes(base: string, needed: readonly string[]): string {
  const scopes = base.split(/[ ,]+/).filter(Boolean);
  for (const scope of needed) if (!scopes.includes(scope)) scopes.push(scope);
  return scopes.join(" ");
}

/** GitHub scopes the policy needs: read:org for org/team rules, user:email for e-mail rules. */
function githubPolicyScopes(policy: AccessPolicyConfig | undefined): string[] {
  if (!policy || policy.anyUser) return [];
  const needed: string[] = [];
  if (policy.githubOrgs.length) needed.push("read:org");
  if (policy.emailDomains.length || policy.users.some((u) => u.includes("@"))) needed.push("user:email");
  return needed;
}

/** What every OpenID Connect provider (Google included) takes the same way from the configuration. */
function oidcSettings(upstream: Config["upstream"], options: ProviderOptions) {
  return {
    clientId: upstream.clientId ?? "",
    clientSecret: upstream.clientSecret ?? "",
    scopes: upstream.scopes ?? "openid email profile",
    timeoutMs: upstream.timeoutMs,
    groupsClaim: options.policy?.groupsClaim ?? "groups",
  };
}

export function createUpstreamProvider(upstream: Config["upstream"], options: ProviderOptions = {}): UpstreamProvider {
  switch (upstream.provider) {
    case "github":
      return new GitHubProvider({
        clientId: upstream.clientId ?? "",
        clientSecret: upstream.clientSecret ?? "",
        githubUrl: upstream.githubUrl,
        apiUrl: upstream.githubApiUrl,
        scopes: withScopes(upstream.scopes ?? "read:user user:email", githubPolicyScopes(options.policy)),
        orgRules: options.policy && !options.policy.anyUser ? options.policy.githubOrgs : [],
        log: options.log,
        timeoutMs: upstream.timeoutMs,
        displayName: upstream.displayName,
      });
    case "google":
      return new OidcProvider({
        ...oidcSettings(upstream, options),
        kind: "google",
        displayName: upstream.displayName ?? "Google",
        issuer: upstream.issuer ?? "https://accounts.google.com",
        // Google returns a refresh token only for offline access with a consent prompt.
        extraAuthorizationParams: { access_type: "offline", prompt: "consent" },
      });
    case "oidc":
      return new OidcProvider({
        ...oidcSettings(upstream, options),
        kind: "oidc",
        // Without a name, the issuer's host is what the user can recognise and check.
        displayName: upstream.displayName ?? new URL(upstream.issuer ?? "http://invalid").host,
        issuer: upstream.issuer ?? "",
        offline: true,
      });
    case "demo":
      return new OidcProvider({
        ...oidcSettings(upstream, options),
        kind: "demo",
        displayName: "Demo identity provider",
        issuer: options.demoIssuer ?? "http://127.0.0.1/demo-idp",
        clientId: DEMO_CLIENT_ID,
        clientSecret: options.demoClientSecret ?? "",
        offline: true,
      });
  }
}
