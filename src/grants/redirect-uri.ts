// Redirect URIs (spec §5.5.2, OAuth 2.1 §2.3.1, RFC 8252 §7): https; http on a loopback host;
// for public clients a private-use app scheme (cursor://…). Absolute, no fragment. An
// authorization request then matches a registered one exactly, except for the port of a loopback
// URI, which a native app picks when it starts listening (OAuth 2.1 §8.4.2, RFC 8252 §7.3).
import { isLoopbackHost } from "../config.ts";

export interface RedirectUriRules {
  /** Private-use URI schemes (RFC 8252 §7.1) are allowed: a public client, and the operator allows them. */
  readonly appSchemes: boolean;
}

/**
 * Schemes that are never a place to send an authorization code: they run code in the browser
 * (javascript:, vbscript:, data:, blob:), read local files (file:, filesystem:), reach somewhere
 * that is not an app (ws:, wss:, ftp:, mailto:…) or are browser internals (about:, view-source:).
 */
const NEVER = new Set([
  "javascript",
  "vbscript",
  "data",
  "blob",
  "file",
  "filesystem",
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

/** The scheme of a URI as written (lower-cased), or null when it has none. */
function schemeOf(value: string): string | null {
  return /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(value)?.[1]?.toLowerCase() ?? null;
}

/** Whether `value` is a private-use (app) scheme redirect URI such as cursor://host/path or com.example.app:/cb. */
export function isAppSchemeRedirect(value: string): boolean {
  const scheme = schemeOf(value);
  return scheme !== null && scheme !== "http" && scheme !== "https" && !NEVER.has(scheme);
}

export function redirectUriProblem(value: string, rules: RedirectUriRules = { appSchemes: false }): string | null {
  if (value.includes("#")) return "must not contain a fragment";
  // URL parsing strips surrounding whitespace and control characters, but the stored string is
  // what authorization requests must match exactly: refuse them rather than store a look-alike.
  if (/[\s\x00-\x1f\x7f]/.test(value)) return "must not contain whitespace or control characters";
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "must be an absolute URI";
  }
  if (url.protocol === "https:") return null;
  if (url.protocol === "http:") {
    if (isLoopbackHost(url.hostname)) return null;
    return "must use https, or http only on a loopback host (localhost, 127.0.0.1, [::1])";
  }
  const scheme = url.protocol.slice(0, -1);
  if (NEVER.has(scheme)) return `uses the scheme ${scheme}:, which is never allowed for a redirect`;
  if (url.username || url.password) return "must not contain a user name or password";
  if (!rules.appSchemes) {
    return "must use https, or http on a loopback host (localhost, 127.0.0.1, [::1]); app schemes such as cursor:// are accepted only for public clients (token_endpoint_auth_method none) when the server allows them";
  }
  if (url.pathname === "" && url.host === "") return "must name a path or host after the scheme";
  return null;
}

/** `http://<loopback host>[:port]<rest>` split into the parts the port-free comparison uses. */
const LOOPBACK = /^http:\/\/(\[::1\]|localhost|127(?:\.\d{1,3}){3})(?::(\d{1,5}))?(?=[/?]|$)(.*)$/s;

function loopbackParts(value: string): { host: string; port: number | null; rest: string } | null {
  const m = LOOPBACK.exec(value);
  if (!m || !isLoopbackHost(m[1]!)) return null;
  const port = m[2] === undefined ? null : Number(m[2]);
  if (port !== null && (port < 1 || port > 65535)) return null;
  const rest = m[3] === "" ? "/" : m[3]!;
  return { host: m[1]!, port, rest };
}

/**
 * The redirect URI an authorization request may use, or null when it matches none registered.
 * Exact string equality, except that a registered loopback URI (http on 127.0.0.1, [::1] or
 * localhost, with or without a port) matches the same URI on any port: same scheme, host, path
 * and query. The request's own URI is what is returned, stored and later required at /token.
 */
export function matchRedirectUri(registered: readonly string[], requested: string): string | null {
  if (registered.includes(requested)) return requested;
  if (/[\s\x00-\x1f\x7f#]/.test(requested)) return null;
  const asked = loopbackParts(requested);
  if (!asked) return null;
  try {
    new URL(requested);
  } catch {
    return null;
  }
  for (const uri of registered) {
    const mine = loopbackParts(uri);
    if (mine && mine.host === asked.host && mine.rest === asked.rest) return requested;
  }
  return null;
}
