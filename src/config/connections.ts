// Connected accounts as configured: the services (GitHub, Google, an OpenID Connect issuer, a plain
// OAuth 2 provider) at which each user links an account of their own, and how a server that names
// one receives that user's token. The configuration file's `connections` and each server's
// `connection` / `connectionInject` become these values (file.ts); the grants layer links,
// refreshes and hands out the tokens (grants/connections.ts).

/** Where a connection's accounts live. */
export type ConnectionProviderConfig =
  | { readonly kind: "github"; readonly githubUrl: string; readonly apiUrl: string }
  | { readonly kind: "google"; readonly issuer: string }
  | { readonly kind: "oidc"; readonly issuer: string }
  | {
      readonly kind: "oauth2";
      readonly authorizeUrl: string;
      readonly tokenUrl: string;
      readonly revokeUrl: string | undefined;
      readonly userinfoUrl: string | undefined;
      /** How the broker authenticates at the token endpoint (default client_secret_basic). */
      readonly tokenAuth: "client_secret_basic" | "client_secret_post";
      /** Where userinfo names the account: its id (default id, then sub) and login (default login, username, email, name). */
      readonly subjectField: string | undefined;
      readonly loginField: string | undefined;
      /** Parameters the service's authorization page needs besides OAuth's (Atlassian: audience, prompt). */
      readonly authorizeParams: Readonly<Record<string, string>>;
    };

export interface ConnectionConfig {
  /** The key under `connections`: URL-safe (PUBLIC_URL/account/connect/<name>). */
  readonly name: string;
  /** How pages name the service ("GitHub"): written, or the provider's usual name. */
  readonly title: string;
  readonly provider: ConnectionProviderConfig;
  readonly clientId: string;
  readonly clientSecret: string;
  readonly scopes: readonly string[];
}

/** How a server receives the token of the connection it names. */
export type ConnectionInject =
  /** An HTTP server: a request header, its value `format` with `{token}` replaced. */
  | { readonly kind: "header"; readonly header: string; readonly format: string }
  /** A stdio server: a variable of the child's environment. */
  | { readonly kind: "env"; readonly variable: string };

export interface ServerConnection {
  readonly name: string;
  readonly inject: ConnectionInject;
}

/** What an HTTP server receives when its entry says nothing: the token as a bearer credential. */
export const DEFAULT_HEADER_INJECT: ConnectionInject = Object.freeze({ kind: "header", header: "authorization", format: "Bearer {token}" });

/** The placeholder a header format must hold. */
export const TOKEN_PLACEHOLDER = "{token}";

/**
 * Headers a connection may not be injected as: the broker sets them itself (identity, assertion,
 * trace, MCP transport) or HTTP owns them. A token there would be overwritten or break the request.
 */
const RESERVED_HEADERS = new Set([
  "host",
  "content-length",
  "content-type",
  "transfer-encoding",
  "connection",
  "cookie",
  "accept",
  "origin",
  "traceparent",
  "tracestate",
  "baggage",
  "mcp-session-id",
  "mcp-protocol-version",
  "mcp-method",
  "mcp-name",
  "last-event-id",
  "x-upstream-access-token",
  "x-forwarded-for",
  "x-forwarded-host",
  "x-forwarded-proto",
]);

/** Why a header name cannot carry a connection's token (undefined: it can). */
export function injectHeaderProblem(header: string): string | undefined {
  if (!/^[A-Za-z0-9!#$%&'*+.^_`|~-]+$/.test(header)) return `expected a header name such as Authorization or X-GitHub-Token, got ${JSON.stringify(header)}`;
  const lower = header.toLowerCase();
  if (RESERVED_HEADERS.has(lower) || lower.startsWith("x-auth-") || lower.startsWith("mcp-param-"))
    return `${header} is set by the broker or by HTTP itself: choose another header, such as Authorization or X-GitHub-Token`;
  return undefined;
}

/** The header value a format gives for a token. */
export function injectedHeaderValue(format: string, token: string): string {
  return format.replaceAll(TOKEN_PLACEHOLDER, token);
}

const PROVIDER_TITLES: Readonly<Record<ConnectionProviderConfig["kind"], string | undefined>> = {
  github: "GitHub",
  google: "Google",
  oidc: undefined,
  oauth2: undefined,
};

/** The name pages show for a connection that does not give one. */
export function defaultConnectionTitle(name: string, provider: ConnectionProviderConfig): string {
  const known = PROVIDER_TITLES[provider.kind];
  if (known) return known;
  const url = provider.kind === "oidc" ? provider.issuer : provider.kind === "oauth2" ? provider.authorizeUrl : undefined;
  try {
    return url ? new URL(url).host : name;
  } catch {
    return name;
  }
}
