// Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; MCP 2025-11-25
// "Client ID Metadata Documents"): a client_id that is an https URL names the JSON document that
// registers the client. This decides whether such a client exists and what it may do; the
// guarded fetch (outbound/) does the I/O. A client seen here becomes a Client row keyed by its URL
// (registrationType "cimd"), so transactions, grants, tokens and audit rows reference it like any
// other client; the row is refreshed whenever the document is fetched again.
import { LRUCache } from "lru-cache";
import type { Db } from "../store/db.ts";
import type { FetchedJson, JsonFetcher } from "../outbound/guarded-fetch.ts";
import { OutboundFetchError } from "../outbound/guarded-fetch.ts";
import { audit } from "./audit.ts";
import { clientMetadataColumns, parseClientMetadata, type ClientMetadata } from "./client-metadata.ts";
import type { Clock } from "../lib/clock.ts";
import { DomainError, PageError } from "./errors.ts";
import { SingleFlight } from "../lib/single-flight.ts";
import { freshnessMs } from "./freshness.ts";
import { MAX_URL_LENGTH } from "./types.ts";
import { inSpan, SpanKind } from "../telemetry/span.ts";
import { redactUrl } from "../logger.ts";

export { DEFAULT_FRESH_MS, freshnessMs, MAX_FRESH_MS, MIN_FRESH_MS } from "./freshness.ts";

export interface MetadataDocumentSettings {
  /** CIMD: off means an https client_id is just an unknown application. */
  readonly enabled: boolean;
  /** CIMD_TRUSTED_HOSTS: documents on these hosts make verified clients. */
  readonly trustedHosts: readonly string[];
}

/**
 * Whether a client_id is written as a metadata document URL: https with a path below the root, no
 * credentials, no fragment, and already in the canonical form the URL parser gives (so that
 * `https://EXAMPLE.com/a/../b` and friends cannot pose as another client: the draft compares
 * client_id as a plain string).
 */
export function isMetadataDocumentUrl(clientId: string): boolean {
  if (!clientId.startsWith("https://") || clientId.length > MAX_URL_LENGTH || clientId.includes("#")) return false;
  try {
    const url = new URL(clientId);
    return url.href === clientId && url.pathname !== "/" && !url.username && !url.password;
  } catch {
    return false;
  }
}

/** The host (with a non-default port) that publishes a document: who vouches for the client. */
export function documentHost(clientId: string): string {
  return new URL(clientId).host;
}

export function isTrustedHost(clientId: string, trustedHosts: readonly string[]): boolean {
  const url = new URL(clientId);
  return trustedHosts.includes(url.host) || trustedHosts.includes(url.hostname);
}

const START_AGAIN = "Go back to the application you came from. If this keeps happening, tell the application's developer.";

function refused(clientId: string, why: string): PageError {
  return new PageError(
    "invalid_request",
    "This application could not be identified",
    `The application says it is described at ${clientId}, but ${why}`,
    START_AGAIN,
  );
}

/** What the document says, as a registration: or why it cannot be one. */
export function parseMetadataDocument(clientId: string, body: unknown): ClientMetadata {
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw refused(clientId, "that document is not a JSON object.");
  const doc = body as Record<string, unknown>;
  if (doc.client_id !== clientId)
    throw refused(
      clientId,
      `that document names another client_id (${JSON.stringify(doc.client_id ?? null).slice(0, 200)}): it must be exactly its own address.`,
    );
  if ("client_secret" in doc || "client_secret_expires_at" in doc)
    throw refused(clientId, "that document contains a client_secret, which a published document must not.");
  // Every published document of the clients that use them names its client (ChatGPT, Claude,
  // Claude Code, VS Code, opencode); the MCP revisions since 2025-11-25 require it.
  if (typeof doc.client_name !== "string" || doc.client_name.trim() === "")
    throw refused(
      clientId,
      "that document has no client_name. A metadata document must carry client_id, client_name and redirect_uris (MCP authorization, Client ID Metadata Documents).",
    );
  // A published document can hold no shared secret: absent means "none" here, not RFC 7591's
  // client_secret_basic, which no such client could ever use. private_key_jwt needs none: the
  // client signs with a key whose public half its host publishes (ChatGPT's document).
  const method = doc.token_endpoint_auth_method ?? "none";
  if (method !== "none" && method !== "private_key_jwt") {
    throw refused(
      clientId,
      `its token_endpoint_auth_method is ${JSON.stringify(method).slice(0, 100)}. This server accepts metadata-document clients as public clients ("none", with PKCE) or with private_key_jwt.`,
    );
  }
  let metadata: ClientMetadata;
  try {
    metadata = parseClientMetadata({ ...doc, token_endpoint_auth_method: method }, "dynamic", { ignoreUnknownGrantTypes: true });
  } catch (err) {
    if (err instanceof DomainError) throw refused(clientId, `its metadata is not valid: ${err.description}`);
    throw err;
  }
  // A document that also lists "none" may go without an assertion (PKCE still holds); one that
  // sends an assertion must pass it (client-authentication.ts).
  const supported = doc.token_endpoint_auth_methods_supported;
  const alsoPublic = method === "private_key_jwt" && Array.isArray(supported) && supported.includes("none");
  return { ...metadata, fallbackAuthMethod: alsoPublic ? "none" : null };
}

type Resolved = { readonly freshUntil: number };

/** Fetches, checks, caches and records metadata-document clients. */
export class MetadataDocuments {
  private readonly fresh = new LRUCache<string, Resolved>({ max: 1000 });
  private readonly flights = new SingleFlight<void>();

  constructor(
    private readonly db: Db,
    readonly settings: MetadataDocumentSettings,
    private readonly fetcher: JsonFetcher,
    private readonly clock: Clock,
  ) {}

  /**
   * Makes sure the client's Client row reflects a fresh copy of its document: fetched again when
   * the cached one is stale. Throws a PageError (a page for the person) when the document is
   * unreachable, gone, or not an acceptable registration.
   */
  async ensureFresh(clientId: string): Promise<void> {
    const cached = this.fresh.get(clientId);
    if (cached && cached.freshUntil > this.clock.now()) return;
    await this.flights.run(clientId, () => this.fetchAndRecord(clientId));
  }

  private async fetchAndRecord(clientId: string): Promise<void> {
    this.fresh.delete(clientId);
    let fetched: FetchedJson;
    try {
      fetched = await inSpan(
        "cimd fetch",
        () => ({ "url.full": redactUrl(clientId) }),
        () => this.fetcher.getJson(clientId),
        { kind: SpanKind.CLIENT },
      );
    } catch (err) {
      if (err instanceof OutboundFetchError) throw refused(clientId, `it could not be fetched: ${err.message}.`);
      throw err;
    }
    if (fetched.status !== 200) throw refused(clientId, `that document is gone (HTTP ${fetched.status}): the application can no longer connect this way.`);
    const metadata = parseMetadataDocument(clientId, fetched.body);
    await this.record(clientId, metadata);
    this.fresh.set(clientId, { freshUntil: this.clock.now() + freshnessMs(fetched.headers, this.clock.now()) });
  }

  private async record(clientId: string, metadata: ClientMetadata): Promise<void> {
    const data = clientMetadataColumns(metadata);
    const existing = await this.db.client.findUnique({ where: { id: clientId }, select: { registrationType: true } });
    if (existing) {
      // Only a row this module made follows the document (an operator's client keeps its own).
      if (existing.registrationType === "cimd") await this.db.client.update({ where: { id: clientId }, data });
      return;
    }
    try {
      await this.db.client.create({ data: { id: clientId, secretHash: null, secretPrefix: null, registrationType: "cimd", ...data } });
    } catch (err) {
      // Another instance (or request) recorded it first: that row is as good as this one.
      if (await this.db.client.findUnique({ where: { id: clientId }, select: { id: true } })) return;
      throw err;
    }
    await audit(this.db, {
      type: "client.registered",
      clientId,
      detail: { registrationType: "cimd", name: metadata.clientName, host: documentHost(clientId) },
    });
  }
}
