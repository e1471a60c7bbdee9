// The public keys a private_key_jwt client signs its assertions with (RFC 7523 §2.2): the key set
// its registration holds (the operator's --jwks-file, a registration's or document's `jwks`), or the
// one its jwks_uri publishes. A published set is fetched through the guarded fetch (outbound/: the
// same SSRF guard as metadata documents), kept as its HTTP caching headers say within bounds, and
// fetched again ahead of time only when an assertion names a key it does not hold (the client
// rotated its keys), at most once per MIN_REFETCH_MS: whoever sends assertions with made-up key
// ids cannot turn this server into a fetch storm against the key set's host.
import type { JsonFetcher } from "../outbound/guarded-fetch.ts";
import { fetchKeySet } from "../outbound/key-set-fetch.ts";
import { OutboundFetchError } from "../outbound/fetch-error.ts";
import { boundedCache } from "../lib/bounded-cache.ts";
import type { Clock } from "../lib/clock.ts";
import { InvalidClient } from "./errors.ts";
import { freshnessMs } from "./freshness.ts";
import { SingleFlight } from "../lib/single-flight.ts";
import type { JsonWebKeySet, RegisteredClient } from "./types.ts";
import { firstLine } from "../lib/error-text.ts";

/** More keys than any client rotates through: a set larger than this is not a client's key set. */
const MAX_KEYS = 20;
/** A forced fetch (unknown key id) comes at most this often per key set; so does a retry after a failure. */
export const MIN_REFETCH_MS = 30_000;
/** Key sets held at once (least recently used first out). */
const CACHE_LIMIT = 1000;

const KEY_TYPES = new Set(["RSA", "EC", "OKP"]);
/** What each key type must carry to be a public key (RFC 7518 §6, RFC 8037 §2). */
const PUBLIC_MEMBERS: Readonly<Record<string, readonly string[]>> = { RSA: ["n", "e"], EC: ["crv", "x", "y"], OKP: ["crv", "x"] };
/** Private key material (RFC 7518 §6.2.2, §6.3.2, RFC 8037 §2; `k` is a symmetric key). */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];

/**
 * The signing keys of a JWK Set as a client registered or published it. Keys of types this server
 * cannot verify with, and keys marked for encryption, are left out (RFC 7517 §5: ignore what is not
 * understood); a symmetric or private key anywhere refuses the whole set, since whoever made it
 * handed out a secret. Throws an Error whose message completes "the key set …".
 */
export function parseKeySet(value: unknown): JsonWebKeySet {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error('is not a JWK Set (a JSON object with "keys")');
  const keys = (value as { keys?: unknown }).keys;
  if (!Array.isArray(keys)) throw new Error('has no "keys" array');
  if (keys.length > MAX_KEYS) throw new Error(`has ${keys.length} keys; at most ${MAX_KEYS} are accepted`);
  const usable = keys.filter((key, i) => {
    if (typeof key !== "object" || key === null || Array.isArray(key)) throw new Error(`has a key that is not an object (keys[${i}])`);
    const jwk = key as Record<string, unknown>;
    if (jwk.kty === "oct") throw new Error(`holds a symmetric key (keys[${i}], kty "oct"): a client proves itself here with a public key only`);
    const secret = PRIVATE_MEMBERS.find((m) => m in jwk);
    if (secret) throw new Error(`holds private key material (keys[${i}] has "${secret}"): publish only the public keys`);
    if (typeof jwk.kty !== "string" || !KEY_TYPES.has(jwk.kty)) return false;
    if (jwk.use !== undefined && jwk.use !== "sig") return false;
    const missing = PUBLIC_MEMBERS[jwk.kty]!.find((m) => typeof jwk[m] !== "string");
    if (missing) throw new Error(`has an ${jwk.kty} key without "${missing}" (keys[${i}])`);
    return true;
  });
  if (usable.length === 0) throw new Error("has no public signing key (kty RSA, EC or OKP)");
  return { keys: usable as JsonWebKeySet["keys"] };
}

interface CachedSet {
  readonly keys: JsonWebKeySet;
  readonly fetchedAt: number;
  readonly freshUntil: number;
}

function keysUnavailable(client: RegisteredClient, why: string): InvalidClient {
  return new InvalidClient(`The key set of client ${client.id} (${client.jwksUri}) ${why}, so its client_assertion cannot be checked.`);
}

export class ClientKeys {
  private readonly sets = boundedCache<string, CachedSet>(CACHE_LIMIT);
  /** Key sets that could not be fetched lately: not asked again before `until`. */
  private readonly failures = boundedCache<string, { readonly until: number; readonly error: InvalidClient }>(CACHE_LIMIT);
  private readonly flights = new SingleFlight<CachedSet>();

  constructor(
    private readonly fetcher: JsonFetcher,
    private readonly clock: Clock,
  ) {}

  /** The client's keys: its registered set, or the published one (from the cache while fresh). */
  async of(client: RegisteredClient): Promise<JsonWebKeySet> {
    if (client.jwks) return client.jwks;
    const url = this.urlOf(client);
    const cached = this.sets.get(url);
    if (cached && cached.freshUntil > this.clock.now()) return cached.keys;
    return (await this.fetch(client, url)).keys;
  }

  /**
   * After an assertion named a key the set does not hold: the published set fetched again, or null
   * when there is nothing newer to be had (a registered set, or one fetched within MIN_REFETCH_MS).
   */
  async refreshed(client: RegisteredClient): Promise<JsonWebKeySet | null> {
    if (client.jwks) return null;
    const url = this.urlOf(client);
    const cached = this.sets.get(url);
    if (cached && this.clock.now() - cached.fetchedAt < MIN_REFETCH_MS) return null;
    return (await this.fetch(client, url)).keys;
  }

  private urlOf(client: RegisteredClient): string {
    if (!client.jwksUri) throw new InvalidClient(`Client ${client.id} has no keys registered (jwks_uri or jwks), so it cannot use private_key_jwt.`);
    return client.jwksUri;
  }

  private fetch(client: RegisteredClient, url: string): Promise<CachedSet> {
    const failed = this.failures.get(url);
    if (failed && failed.until > this.clock.now()) return Promise.reject(failed.error);
    return this.flights.run(url, async () => {
      try {
        const fetched = await this.load(client, url);
        this.failures.delete(url);
        this.sets.set(url, fetched);
        return fetched;
      } catch (err) {
        if (err instanceof InvalidClient) this.failures.set(url, { until: this.clock.now() + MIN_REFETCH_MS, error: err });
        throw err;
      }
    });
  }

  private async load(client: RegisteredClient, url: string): Promise<CachedSet> {
    let fetched: Awaited<ReturnType<typeof fetchKeySet>>;
    try {
      fetched = await fetchKeySet(this.fetcher, url);
    } catch (err) {
      if (err instanceof OutboundFetchError) throw keysUnavailable(client, `could not be fetched: ${err.message}`);
      throw err;
    }
    let keys: JsonWebKeySet;
    try {
      keys = parseKeySet(fetched.body);
    } catch (err) {
      throw keysUnavailable(client, `is not usable: it ${firstLine(err)}`);
    }
    const now = this.clock.now();
    return { keys, fetchedAt: now, freshUntil: now + freshnessMs(fetched.headers, now) };
  }
}
