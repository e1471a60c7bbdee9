// RFC 8707 resource indicators: canonical form (lower-case scheme and host, default port
// dropped, no trailing slash, no fragment) and the rule that a resource must name this broker's
// protected resource.
import { InvalidTarget } from "./errors.ts";

/** Canonical form of an absolute URI, or null when it is not one (or has a fragment). */
export function canonicalUri(value: string): string | null {
  if (value.includes("#")) return null;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return null;
  }
  // Userinfo is dropped by the canonical form below, so it must not slip through unnoticed.
  if (!url.host || url.username || url.password) return null;
  // WHATWG URL already lower-cases scheme and host and drops default ports.
  const path = url.pathname.replace(/\/+$/, "");
  return `${url.protocol}//${url.host}${path}${url.search}`;
}

/**
 * Other names clients use for the one resource this broker serves, each mapped to the canonical
 * one: the MCP URL with a query string (a client that pastes `…/mcp?tenant=x` sends it as its
 * resource), the bare origin, and PUBLIC_URL itself (RFC 8707 §2 lets a client name a resource by a
 * less specific URI, and the MCP SDKs send the server's origin when they do not know its path).
 * Unambiguous because the broker protects exactly one resource. Anything else stays invalid_target.
 */
function aliasOf(canonical: string, protectedResource: string): boolean {
  const url = new URL(canonical);
  const withoutQuery = `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`;
  if (withoutQuery === protectedResource) return true;
  if (url.search) return false;
  const resource = new URL(protectedResource);
  const publicUrl = protectedResource.replace(/\/mcp$/, "");
  return canonical === resource.origin || canonical === publicUrl;
}

/**
 * The canonical resource of a request: the broker's protected resource when the client sent
 * none (2025-03-26 clients), else the canonical form of what it sent, which must name ours
 * (exactly, or by one of the aliases above).
 */
export function resolveResource(value: string | undefined, protectedResource: string): string {
  if (value === undefined) return protectedResource;
  const canonical = canonicalUri(value);
  if (!canonical) throw new InvalidTarget("resource must be an absolute URI without a fragment.");
  if (canonical !== protectedResource && !aliasOf(canonical, protectedResource))
    throw new InvalidTarget(`This authorization server issues tokens only for ${protectedResource}.`);
  return protectedResource;
}
