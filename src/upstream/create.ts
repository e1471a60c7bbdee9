// The one place that knows which provider implementation serves which UPSTREAM_PROVIDER.
import type { Config } from "../config/load.ts";
import type { AccessPolicyConfig, GitHubOrgRule } from "../config/access-policy.ts";
import type { AccessRules } from "../config/catalogue.ts";
import { GitHubProvider } from "./github.ts";
import { OidcProvider } from "./oidc.ts";
import { OAuth2Provider } from "./oauth2.ts";
import type { ConnectionConfig } from "../config/connections.ts";
import type { UpstreamProvider } from "./provider.ts";

export const DEMO_CLIENT_ID = "mcp-auth-broker-demo";

export interface ProviderOptions {
  /** Issuer URL of the embedded demo IdP (demo mode). */
  readonly demoIssuer?: string;
  /** The broker's client secret at the embedded demo IdP (derived from SECRET_KEY). */
  readonly demoClientSecret?: string;
  /** The access policy: which facts (org membership, groups, e-mails) the provider must read. */
  readonly policy?: AccessPolicyConfig;
  /**
   * Rules beyond the global policy that are decided from the same facts (servers' `access`, tools'
   * `allow`): their orgs and teams are read too, even when the global policy admits anyone.
   */
  readonly narrowingRules?: readonly AccessRules[];
  /** Where a provider notes what an operator may need to fix (e.g. an org's SAML SSO). */
  readonly log?: { warn(fields: Record<string, unknown>, message: string): void };
}

/** The scopes asked for, plus those the policy's facts need (the operator need not know them). */
function withScopes(base: string, needed: readonly string[]): string {
  const scopes = base.split(/[ ,]+/).filter(Boolean);
  for (const scope of needed) if (!scopes.includes(scope)) scopes.push(scope);
  return scopes.join(" ");
}

/** The rule sets whose facts the provider must read: the global policy's (unless it admits anyone) and the narrowing ones. */
function factRules(options: ProviderOptions): AccessRules[] {
  const { policy } = options;
  return [...(policy && !policy.anyUser ? [policy] : []), ...(options.narrowingRules ?? [])];
}

/** Every org and team some rule names, once each (as written: GitHub compares them caselessly). */
function githubOrgRules(options: ProviderOptions): GitHubOrgRule[] {
  const seen = new Map<string, GitHubOrgRule>();
  for (const rules of factRules(options))
    for (const o of rules.githubOrgs) {
      const key = (o.team ? `${o.org}/${o.team}` : o.org).toLowerCase();
      if (!seen.has(key)) seen.set(key, o);
    }
  return [...seen.values()];
}

/** GitHub scopes the rules need: read:org for org/team rules, user:email for e-mail rules. */
function githubPolicyScopes(options: ProviderOptions): string[] {
  const rules = factRules(options);
  const needed: string[] = [];
  if (rules.some((r) => r.githubOrgs.length)) needed.push("read:org");
  if (rules.some((r) => r.emailDomains.length || r.users.some((u) => u.includes("@")))) needed.push("user:email");
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
        scopes: withScopes(upstream.scopes ?? "read:user user:email", githubPolicyScopes(options)),
        orgRules: githubOrgRules(options),
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

/**
 * The provider of a connected-account service: an UpstreamProvider without the login role (its
 * accounts are linked to a user who signed in elsewhere; no access policy reads them).
 */
export function createConnectionProvider(connection: ConnectionConfig, timeoutMs: number): UpstreamProvider {
  const { provider, clientId, clientSecret, title } = connection;
  const scopes = connection.scopes.join(" ");
  switch (provider.kind) {
    case "github":
      return new GitHubProvider({ clientId, clientSecret, githubUrl: provider.githubUrl, apiUrl: provider.apiUrl, scopes, timeoutMs, displayName: title });
    case "google":
    case "oidc":
      return new OidcProvider({
        kind: provider.kind,
        displayName: title,
        issuer: provider.issuer,
        clientId,
        clientSecret,
        // The ID token names the account; the service's own scopes come on top.
        scopes: ["openid", "email", "profile", ...connection.scopes.filter((s) => !["openid", "email", "profile"].includes(s))].join(" "),
        timeoutMs,
        ...(provider.kind === "google" ? { extraAuthorizationParams: { access_type: "offline", prompt: "consent" } } : { offline: true }),
      });
    case "oauth2":
      return new OAuth2Provider({
        displayName: title,
        authorizeUrl: provider.authorizeUrl,
        tokenUrl: provider.tokenUrl,
        ...(provider.revokeUrl ? { revokeUrl: provider.revokeUrl } : {}),
        ...(provider.userinfoUrl ? { userinfoUrl: provider.userinfoUrl } : {}),
        ...(provider.subjectField ? { subjectField: provider.subjectField } : {}),
        ...(provider.loginField ? { loginField: provider.loginField } : {}),
        tokenAuth: provider.tokenAuth,
        extraAuthorizationParams: provider.authorizeParams,
        clientId,
        clientSecret,
        scopes,
        timeoutMs,
        settingName: `connections.${connection.name}`,
      });
  }
}
