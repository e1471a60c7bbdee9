// Redirect URIs (spec §5.5.2, OAuth 2.1 §2.3.1, RFC 8252 §7): https; http on a loopback host;
// for public clients a private-use app scheme (cursor://…). Absolute, no fragment, no user name or
// password. One rule for every way a URI arrives: /register, the operator CLI and metadata
// documents (all through client-metadata.ts), and /authorize, which checks the requested URI again
// before matching it (so a registration stored under an older rule is held to this one). An
// authorization request then matches a registered URI exactly, except for the port of a loopback
// URI, which a native app picks when it starts listening (OAuth 2.1 §8.4.2, RFC 8252 §7.3).
//
// Checked on the string as written, not only on what the WHATWG URL parser makes of it: the parser
// forgives (`http://0x7f000001/` becomes `http://127.0.0.1/`, `http://127.1/` too), while the
// string is what is stored, compared and handed to the browser.

export interface RedirectUriRules {
  /** Private-use URI schemes (RFC 8252 §7.1) are allowed: a public client, and the operator allows them. */
  readonly appSchemes: boolean;
}

/**
 * Schemes that are never a place to send an authorization code: they run code in the browser
 * (javascript:, vbscript:, data:, blob:), read local files (file:, filesystem:, jar:), reach
 * somewhere that is not an app (ws:, wss:, ftp:, mailto:…) or are browser internals (about:,
 * view-source:, chrome:, intent:).
 */
const NEVER = new Set([
  "javascript",
  "vbscript",
  "data",
  "blob",
  "file",
  "filesystem",
  "jar",
  "about",
  "view-source",
  "ws",
  "wss",
  "ftp",
  "mailto",
  "tel",
  "sms",
  "chrome",
  "intent",
]);

/**
 * The browsers' own schemes (iOS, Android, Windows): a redirect there opens a web page, or any URL
 * it carries, in that browser instead of returning to an app. Never app schemes; named here so the
 * refusal can say so.
 */
const BROWSERS = new Set([
  "microsoft-edge",
  "microsoft-edge-http",
  "microsoft-edge-https",
  "googlechrome",
  "googlechromes",
  "firefox",
  "firefox-focus",
  "opera",
  "opera-http",
  "opera-https",
  "brave",
  "x-safari-http",
  "x-safari-https",
  "x-web-search",
]);

/**
 * App schemes real MCP clients register that are not in the reverse-DNS form RFC 8252 §7.1 asks
 * for (a reverse-DNS scheme such as com.example.app needs no entry here). Sources:
 * - cursor: Cursor, `cursor://anysphere.cursor-mcp/oauth/callback` (Cursor's MCP docs, quoted in
 *   makeplane/plane-mcp-server#159) and before it `cursor://anysphere.cursor-retrieval/oauth/…`;
 * - vscode, vscode-insiders, vscodium, windsurf, trae, kiro, positron, codium: VS Code and its
 *   forks; extensions such as Cline register `<the editor's scheme>://saoudrizwan.claude-dev/mcp-auth/callback/<hash>`
 *   (cline/cline src/services/mcp/McpOAuthRedirectResolver.ts);
 * - zed: Zed, `zed://mcp/oauth/callback` (its context_server OAuth client);
 * - the native MCP clients Laravel MCP deployments allow (trypostit/trypost config/mcp.php):
 *   antigravity, chatgpt, claude, claude-cli, claude-code, claude-desktop, claudeai, codex, continue,
 *   devin, goose, grok, hermes, jetbrains, lmstudio, opencode, raycast, warp, xai.
 */
const KNOWN_APP_SCHEMES = new Set([
  "cursor",
  "vscode",
  "vscode-insiders",
  "vscodium",
  "codium",
  "windsurf",
  "trae",
  "kiro",
  "positron",
  "zed",
  "antigravity",
  "chatgpt",
  "claude",
  "claude-cli",
  "claude-code",
  "claude-desktop",
  "claudeai",
  "codex",
  "continue",
  "devin",
  "goose",
  "grok",
  "hermes",
  "jetbrains",
  "lmstudio",
  "opencode",
  "raycast",
  "warp",
  "xai",
]);

/** A scheme named after a domain its app controls, in reverse order (RFC 8252 §7.1): com.example.app. */
const REVERSE_DNS = /^[a-z][a-z0-9-]*(\.[a-z0-9-]+)+$/;

/** The loopback hosts an http redirect may name, exactly as written, with an optional port 1–65535. */
const LOOPBACK_AUTHORITY = /^(127\.0\.0\.1|\[::1\]|localhost)(?::([1-9]\d{0,4}))?$/;

/** Something after the scheme that is itself a URL (`https://…`, `%3A%2F%2F…`): a wrapper, not an app's address. */
const WRAPPED_URL = /[a-z][a-z0-9+.-]*:(\/|%2f)|%3a(\/|%2f)/i;

/** The scheme of a URI as written (lower-cased), or null when it has none. */
function schemeOf(value: string): string | null {
  return /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(value)?.[1]?.toLowerCase() ?? null;
}

/** The authority of `scheme://authority/…` as written, or null when the URI has none. */
function authorityOf(value: string): string | null {
  return /^[A-Za-z][A-Za-z0-9+.-]*:\/\/([^/?#]*)/.exec(value)?.[1] ?? null;
}

function loopbackPortValid(authority: string): boolean {
  const m = LOOPBACK_AUTHORITY.exec(authority);
  return m !== null && (m[2] === undefined || Number(m[2]) <= 65535);
}

/** Why `value` is not an acceptable app-scheme redirect (scheme lower-cased), or null when it is one. */
function appSchemeProblem(value: string, scheme: string): string | null {
  if (BROWSERS.has(scheme)) return `uses the scheme ${scheme}:, a web browser's own, which opens a web page rather than returning to an app`;
  if (!REVERSE_DNS.test(scheme) && !KNOWN_APP_SCHEMES.has(scheme)) {
    return `uses the scheme ${scheme}:, which is neither a reverse domain name (such as com.example.app:/callback, RFC 8252 §7.1) nor a known MCP client's app scheme (such as cursor://)`;
  }
  const rest = value.slice(scheme.length + 1);
  if (!rest.startsWith("/")) return `must continue with :/ or :// after the scheme (such as ${scheme}:/callback or ${scheme}://host/callback)`;
  const inner = rest.replace(/^\/+/, "");
  const innerScheme = schemeOf(inner);
  if (WRAPPED_URL.test(rest) || (innerScheme !== null && (NEVER.has(innerScheme) || innerScheme === "http" || innerScheme === "https"))) {
    return "wraps another URL, which an app scheme redirect must not carry";
  }
  return null;
}

/** Whether `value` is a private-use (app) scheme redirect URI this server accepts, such as cursor://host/path or com.example.app:/cb. */
export function isAppSchemeRedirect(value: string): boolean {
  const scheme = schemeOf(value);
  return scheme !== null && scheme !== "http" && scheme !== "https" && !NEVER.has(scheme) && redirectUriProblem(value, { appSchemes: true }) === null;
}

export function redirectUriProblem(value: string, rules: RedirectUriRules = { appSchemes: false }): string | null {
  if (value.includes("#")) return "must not contain a fragment";
  // URL parsing strips surrounding whitespace and control characters, but the stored string is
  // what authorization requests must match exactly: refuse them rather than store a look-alike. A
  // backslash is no URI character; the parser reads it as a slash in http(s).
  if (/[\s\x00-\x1f\x7f]/.test(value)) return "must not contain whitespace or control characters";
  if (value.includes("\\")) return "must not contain a backslash";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute URI";
  }
  // user@host: the browser goes to the host, but a person (or a sloppy check) reads the user part
  // as the destination (http://evil.example@127.0.0.1/cb). Also an empty one (http://@host).
  if (url.username || url.password || authorityOf(value)?.includes("@")) return "must not contain a user name or password (user@ before the host)";
  if (url.protocol === "https:") return null;
  if (url.protocol === "http:") {
    // Written `http://` + host (not `http:/host`, which the parser also forgives).
    const authority = authorityOf(value);
    if (authority !== null && loopbackPortValid(authority)) return null;
    return "must use https, or http only on a loopback host written exactly 127.0.0.1, [::1] or localhost (with any port)";
  }
  const scheme = schemeOf(value)!;
  if (NEVER.has(scheme)) return `uses the scheme ${scheme}:, which is never allowed for a redirect`;
  if (!rules.appSchemes) {
    return "must use https, or http on a loopback host (localhost, 127.0.0.1, [::1]); app schemes such as cursor:// are accepted only for public clients (token_endpoint_auth_method none) when the server allows them";
  }
  return appSchemeProblem(value, scheme);
}

/** `http://<loopback host>[:port]<rest>` split into the parts the port-free comparison uses. */
const LOOPBACK = /^http:\/\/(\[::1\]|localhost|127\.0\.0\.1)(?::(\d{1,5}))?(?=[/?]|$)(.*)$/s;

function loopbackParts(value: string): { host: string; rest: string } | null {
  const m = LOOPBACK.exec(value);
  if (!m) return null;
  return { host: m[1]!, rest: m[3] === "" ? "/" : m[3]! };
}

/**
 * The redirect URI an authorization request may use, or null when it matches none registered.
 * The requested URI must pass the rule above (whatever rule was in force when it was registered).
 * Exact string equality, except that a registered loopback URI (http on 127.0.0.1, [::1] or
 * localhost, with or without a port) matches the same URI on any port: same scheme, host, path
 * and query. The request's own URI is what is returned, stored and later required at /token.
 */
export function matchRedirectUri(registered: readonly string[], requested: string): string | null {
  if (redirectUriProblem(requested, { appSchemes: true }) !== null) return null;
  if (registered.includes(requested)) return requested;
  const asked = loopbackParts(requested);
  if (!asked) return null;
  for (const uri of registered) {
    const mine = loopbackParts(uri);
    if (mine && mine.host === asked.host && mine.rest === asked.rest) return requested;
  }
  return null;
}
