// The one place that knows which provider implementation serves which UPSTREAM_PROVIDER.
import type { Config } from "../config.ts";
import { GitHubProvider } from "./github.ts";
import { OidcProvider } from "./oidc.ts";
import type { UpstreamProvider } from "./provider.ts";

export const DEMO_CLIENT_ID = "mcp-auth-broker-demo";

export interface ProviderOptions {
  /** Issuer URL of the embedded demo IdP (demo mode). */
  readonly demoIssuer?: string;
  /** The broker's client secret at the embedded demo IdP (derived from SECRET_KEY). */
  readonly demoClientSecret?: string;
}

export function createUpstreamProvider(upstream: Config["upstream"], options: ProviderOptions = {}): UpstreamProvider {
  switch (upstream.provider) {
    case "github":
      return new GitHubProvider({
        clientId: upstream.clientId ?? "",
        clientSecret: upstream.clientSecret ?? "",
        githubUrl: upstream.githubUrl,
        apiUrl: upstream.githubApiUrl,
        scopes: upstream.scopes ?? "read:user user:email",
        timeoutMs: upstream.timeoutMs,
        displayName: upstream.displayName,
      });
    case "google":
      return new OidcProvider({
        kind: "google",
        displayName: upstream.displayName ?? "Google",
        issuer: upstream.issuer ?? "https://accounts.google.com",
        clientId: upstream.clientId ?? "",
        clientSecret: upstream.clientSecret ?? "",
        scopes: upstream.scopes ?? "openid email profile",
        timeoutMs: upstream.timeoutMs,
        // Google returns a refresh token only for offline access with a consent prompt.
        extraAuthorizationParams: { access_type: "offline", prompt: "consent" },
      });
    case "oidc":
      return new OidcProvider({
        kind: "oidc",
        // Without a name, the issuer's host is what the user can recognise and check.
        displayName: upstream.displayName ?? new URL(upstream.issuer ?? "http://invalid").host,
        issuer: upstream.issuer ?? "",
        clientId: upstream.clientId ?? "",
        clientSecret: upstream.clientSecret ?? "",
        scopes: upstream.scopes ?? "openid email profile",
        timeoutMs: upstream.timeoutMs,
        offline: true,
      });
    case "demo":
      return new OidcProvider({
        kind: "demo",
        displayName: "Demo identity provider",
        issuer: options.demoIssuer ?? "http://127.0.0.1/demo-idp",
        clientId: DEMO_CLIENT_ID,
        clientSecret: options.demoClientSecret ?? "",
        scopes: upstream.scopes ?? "openid email profile",
        timeoutMs: upstream.timeoutMs,
        offline: true,
      });
  }
}
