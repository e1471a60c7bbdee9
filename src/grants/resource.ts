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

/** The protected resources of a broker: one per MCP server of its catalogue. */
export interface ProtectedResources {
  /** PUBLIC_URL, without trailing slash. */
  readonly publicUrl: string;
  /** Each server's canonical resource URI; the default one also answers at PUBLIC_URL/mcp. */
  readonly servers: readonly { readonly resourceUrl: string; readonly isDefault: boolean }[];
}

/** A broker that protects exactly `resource` (PUBLIC_URL/mcp): the catalogue of one. */
export function singleResource(resource: string): ProtectedResources {
  return { publicUrl: resource.replace(/\/mcp$/, ""), servers: [{ resourceUrl: resource, isDefault: true }] };
}

/**
 * The server a canonical URI names: its resource URI (with or without a query string: a client
 * that pastes `…/mcp?tenant=x` sends it as its resource), or, for the default server, the other
 * names clients use for it: PUBLIC_URL/mcp where it also answers, the bare origin, and PUBLIC_URL
 * itself (RFC 8707 §2 lets a client name a resource by a less specific URI, and the MCP SDKs send
 * the server's origin when they do not know its path). Unambiguous: only the default server has
 * those names. Anything else names no server.
 */
function serverNamed(canonical: string, resources: ProtectedResources): string | undefined {
  const url = new URL(canonical);
  const withoutQuery = `${url.protocol}//${url.host}${url.pathname.replace(/\/+$/, "")}`;
  const exact = resources.servers.find((s) => s.resourceUrl === withoutQuery);
  if (exact) return exact.resourceUrl;
  const fallback = resources.servers.find((s) => s.isDefault);
  if (!fallback) return undefined;
  if (withoutQuery === `${resources.publicUrl}/mcp`) return fallback.resourceUrl;
  if (url.search) return undefined;
  return canonical === new URL(resources.publicUrl).origin || canonical === resources.publicUrl ? fallback.resourceUrl : undefined;
}

/**
 * Resolutions made, per set of resources: a client sends the same resource with every refresh, and
 * resolving it parses it as a URL twice (about 3% of a refresh on the event loop, perf). Only
 * names that resolved are kept, and at most RESOLVED_LIMIT per set, so that a client sending ever
 * new names of a server (`…/mcp?n=1`, `?n=2`) cannot grow it; past that, each is resolved anew.
 */
const resolved = new WeakMap<ProtectedResources, Map<string, string>>();
const RESOLVED_LIMIT = 256;

/**
 * The canonical resource of a request: the default server's when the client sent none
 * (2025-03-26 clients), else the server the canonical form of what it sent names (exactly, or by
 * one of the names above). A token is then good at that server only.
 */
export function resolveResource(value: string | undefined, protectedResources: ProtectedResources | string): string {
  const resources = typeof protectedResources === "string" ? singleResource(protectedResources) : protectedResources;
  if (value === undefined) {
    const fallback = resources.servers.find((s) => s.isDefault);
    if (fallback) return fallback.resourceUrl;
    throw new InvalidTarget(`This authorization server protects several MCP servers: name one with the resource parameter (${listed(resources)}).`);
  }
  let known = resolved.get(resources);
  const hit = known?.get(value);
  if (hit !== undefined) return hit;
  const canonical = canonicalUri(value);
  if (!canonical) throw new InvalidTarget("resource must be an absolute URI without a fragment.");
  const named = serverNamed(canonical, resources);
  if (!named) throw new InvalidTarget(`This authorization server issues tokens only for ${listed(resources)}.`);
  if (!known) {
    known = new Map();
    resolved.set(resources, known);
  }
  if (known.size < RESOLVED_LIMIT) known.set(value, named);
  return named;
}

function listed(resources: ProtectedResources): string {
  const urls = resources.servers.map((s) => s.resourceUrl);
  return urls.length > 5 ? `${urls.slice(0, 5).join(", ")} and ${urls.length - 5} more` : urls.join(", ");
}

/** The protected resources of a configuration: its catalogue's servers. */
export function protectedResources(config: {
  readonly publicUrl: string;
  readonly catalogue: { readonly servers: ProtectedResources["servers"] };
}): ProtectedResources {
  return { publicUrl: config.publicUrl, servers: config.catalogue.servers };
}
