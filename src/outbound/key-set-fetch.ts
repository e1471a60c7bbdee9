// The outbound GET of a client's published key set (RFC 7591 jwks_uri, for private_key_jwt): the
// address comes from a registration or a metadata document, so it goes through the guarded fetch
// like the documents themselves (https only, no redirects, resolved-address checks, size and time
// limits). What the keys may be is the caller's business (grants/client-keys.ts).
import { OutboundFetchError } from "./fetch-error.ts";
import type { FetchedJson, JsonFetcher } from "./guarded-fetch.ts";
import { inSpan, SpanKind } from "../telemetry/span.ts";
import { redactUrl } from "../logger.ts";

/** The key set's JSON and the caching headers it came with; a missing one (404, 410) is an error here. */
export async function fetchKeySet(fetcher: JsonFetcher, url: string): Promise<FetchedJson> {
  const fetched = await inSpan(
    "jwks fetch",
    () => ({ "url.full": redactUrl(url) }),
    () => fetcher.getJson(url),
    { kind: SpanKind.CLIENT },
  );
  if (fetched.status !== 200) throw new OutboundFetchError("status", `it answered with HTTP status ${fetched.status}`, fetched.status);
  return fetched;
}
