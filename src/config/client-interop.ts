// How far the broker goes to meet real MCP clients, as the operator set it: app-scheme redirects,
// Client ID Metadata Documents, and the scopes clients may ask for. Parsed once at start.
import { z } from "zod";
import { ConfigError, commaList, type Env } from "./values.ts";

export interface ScopeConfig {
  /** SCOPES_SUPPORTED: what clients may ask for (offline_access is always understood too). */
  readonly supported: readonly string[];
  /** SCOPE_DESCRIPTIONS: what the consent page says about each scope. */
  readonly descriptions: Readonly<Record<string, string>>;
  /** SCOPE_IMPLIES: what each scope implies, closed (`admin` → docs:write and docs:read). */
  readonly implies: ScopeImplications;
}

export interface ClientInteropConfig {
  /** ALLOW_APP_SCHEME_REDIRECTS: private-use URI schemes (cursor://…) for public clients. */
  readonly allowAppSchemeRedirects: boolean;
  readonly cimd: {
    /** CIMD: an https URL as client_id names a Client ID Metadata Document. */
    readonly enabled: boolean;
    /** CIMD_TRUSTED_HOSTS: clients whose document lives on these hosts are shown as verified. */
    readonly trustedHosts: readonly string[];
    /** CIMD_ALLOW_PRIVATE_NETWORKS: fetch documents from private/loopback addresses too. */
    readonly allowPrivateNetworks: boolean;
  };
  readonly scopes: ScopeConfig;
}

// RFC 6749 §3.3 scope-token: printable ASCII except space, `"` and `\`.
export const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]+$/;

/** What the consent page says about the scopes every server understands, unless the operator says otherwise. */
export const DEFAULT_DESCRIPTIONS: Readonly<Record<string, string>> = {
  mcp: "Use the MCP server's tools and data as you",
  offline_access: "Stay connected when you are not using it (refresh tokens)",
};

const SCOPE_IMPLIES_EXAMPLE = "docs:write=docs:read,admin=docs:write";

/** One `scope=implied other` entry of SCOPE_IMPLIES. */
const ImpliesEntry = z
  .string()
  .transform((entry) => entry.split("=").map((side) => side.trim()))
  .pipe(
    z.tuple([
      z.string().regex(SCOPE_TOKEN),
      z
        .string()
        .transform((implied) => implied.split(/\s+/).filter(Boolean))
        .pipe(z.array(z.string().regex(SCOPE_TOKEN)).min(1)),
    ]),
  );

/**
 * SCOPE_IMPLIES: `docs:write=docs:read,admin=docs:write` (several implied scopes are separated by
 * spaces; an entry given twice adds up). Every scope named must be one clients may ask for, and
 * offline_access, a request for refresh tokens rather than a permission, takes no part.
 */
function parseImplies(raw: string | undefined, known: readonly string[]): ScopeImplications {
  const direct: Record<string, string[]> = {};
  for (const entry of commaList(raw)) {
    const parsed = ImpliesEntry.safeParse(entry);
    if (!parsed.success) throw new ConfigError("SCOPE_IMPLIES", `expected entries like ${SCOPE_IMPLIES_EXAMPLE}, got ${JSON.stringify(entry)}`);
    const [scope, implied] = parsed.data;
    for (const name of [scope, ...implied]) {
      const problem = impliedScopeProblem(name, known, "SCOPES_SUPPORTED");
      if (problem) throw new ConfigError("SCOPE_IMPLIES", problem);
    }
    direct[scope] = [...(direct[scope] ?? []), ...implied];
  }
  return closeImplications(direct);
}

/**
 * Why `name` cannot take part in an implication (undefined: it can): offline_access is no
 * permission, and every scope named must be one the server understands (`list` says where those are listed).
 */
export function impliedScopeProblem(name: string, known: readonly string[], list: string): string | undefined {
  if (name === "offline_access") return "offline_access asks for refresh tokens; it is no permission, so it neither implies nor is implied";
  if (!known.includes(name))
    return `names the scope ${JSON.stringify(name)}, which ${list} does not list (${known.join(",")}): add it there or correct the name`;
  return undefined;
}

function parseScopes(env: Env): ScopeConfig {
  const supported = commaList(env.SCOPES_SUPPORTED?.replace(/\s+/g, ","));
  for (const scope of supported) {
    if (!SCOPE_TOKEN.test(scope)) throw new ConfigError("SCOPES_SUPPORTED", `expected scope names such as mcp,docs:read, got ${JSON.stringify(scope)}`);
  }
  const descriptions: Record<string, string> = { ...DEFAULT_DESCRIPTIONS };
  // `scope=What the consent page says;other=…` (a semicolon separates entries: descriptions may hold commas).
  for (const entry of (env.SCOPE_DESCRIPTIONS ?? "")
    .split(";")
    .map((e) => e.trim())
    .filter(Boolean)) {
    const at = entry.indexOf("=");
    const scope = at > 0 ? entry.slice(0, at).trim() : "";
    const text = at > 0 ? entry.slice(at + 1).trim() : "";
    if (!scope || !text)
      throw new ConfigError("SCOPE_DESCRIPTIONS", `expected entries like docs:read=Read your documents;docs:write=Change them, got ${JSON.stringify(entry)}`);
    descriptions[scope] = text;
  }
  const effective = supported.length ? supported : ["mcp"];
  // `mcp` is always known, listed or not.
  const implies = parseImplies(env.SCOPE_IMPLIES, [...new Set(["mcp", ...effective])]);
  return { supported: effective, descriptions, implies };
}

/** The switches, parsed by config.ts with its boolean rule. */
export interface InteropSwitches {
  readonly allowAppSchemeRedirects: boolean;
  readonly cimd: boolean;
  readonly cimdAllowPrivateNetworks: boolean;
}

export function parseClientInterop(env: Env, switches: InteropSwitches): ClientInteropConfig {
  const trustedHosts = commaList(env.CIMD_TRUSTED_HOSTS).map((h) => h.toLowerCase());
  for (const host of trustedHosts) {
    if (!/^[a-z0-9.-]+(:\d+)?$/.test(host)) throw new ConfigError("CIMD_TRUSTED_HOSTS", `expected host names such as claude.ai, got ${JSON.stringify(host)}`);
  }
  return {
    allowAppSchemeRedirects: switches.allowAppSchemeRedirects,
    cimd: { enabled: switches.cimd, trustedHosts, allowPrivateNetworks: switches.cimdAllowPrivateNetworks },
    scopes: parseScopes(env),
  };
}

// ALLOWED_ORIGINS: the web origins, besides PUBLIC_URL's own, whose pages may call /mcp from a
// browser (Streamable HTTP: a present Origin that is not allowed MUST get 403, against DNS
// rebinding). Browser-based MCP clients need theirs listed: the MCP Inspector's web UI is
// http://localhost:6274 by default.

export interface AllowedOrigins {
  /** Listed origins in their serialized form (lower-case scheme and host, no default port). */
  readonly origins: readonly string[];
  /** Any http(s) origin on a loopback host (localhost, 127.0.0.1, [::1]): the default in demo mode. */
  readonly loopback: boolean;
}

/** One origin as a browser sends it: scheme, host and port, nothing else. */
const origin = z.string().transform((value, ctx) => {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    ctx.addIssue({ code: "custom", message: "not a URL" });
    return z.NEVER;
  }
  // A trailing "/" is tolerated (it is how a URL is often copied); a path, query or user is not.
  const bare = url.pathname === "/" && !value.includes("?") && !value.includes("#") && !url.username && !url.password;
  if ((url.protocol !== "http:" && url.protocol !== "https:") || !bare) {
    ctx.addIssue({ code: "custom", message: "not an origin" });
    return z.NEVER;
  }
  return url.origin;
});

export function parseAllowedOrigins(env: Env, demoMode: boolean): AllowedOrigins {
  const raw = env.ALLOWED_ORIGINS;
  if (raw === undefined || raw.trim() === "") return { origins: [], loopback: demoMode };
  const origins = commaList(raw).map((entry) => {
    const parsed = origin.safeParse(entry);
    if (!parsed.success) {
      throw new ConfigError(
        "ALLOWED_ORIGINS",
        `expected comma-separated web origins (scheme, host and port only), e.g. https://app.example.com,http://localhost:6274, got ${JSON.stringify(entry.length > 60 ? `${entry.slice(0, 60)}…` : entry)}`,
      );
    }
    return parsed.data;
  });
  return { origins: [...new Set(origins)], loopback: false };
}

/**
 * What each scope implies besides itself (SCOPE_IMPLIES, `docs:write=docs:read,admin=docs:write`),
 * already closed under implication: `admin` lists `docs:write` and `docs:read`.
 */
export type ScopeImplications = Readonly<Record<string, readonly string[]>>;

/**
 * The transitive closure of direct implications: every scope reachable from each. A cycle
 * (`a=b,b=a`) is harmless: the scopes on it imply each other, which is what it says.
 */
export function closeImplications(direct: Readonly<Record<string, readonly string[]>>): ScopeImplications {
  const closed: Record<string, readonly string[]> = {};
  for (const scope of Object.keys(direct)) {
    const reached = new Set<string>();
    const pending = [...(direct[scope] ?? [])];
    while (pending.length > 0) {
      const next = pending.pop()!;
      if (reached.has(next)) continue;
      reached.add(next);
      pending.push(...(direct[next] ?? []));
    }
    reached.delete(scope);
    closed[scope] = [...reached].sort();
  }
  return closed;
}
