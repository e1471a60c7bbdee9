// How long something fetched from a client's host (a metadata document, a key set) is kept: as
// its HTTP caching headers say, within bounds that keep it neither stale for long nor fetched on
// every request.
import type { FetchedJson } from "../outbound/guarded-fetch.ts";

/** Cache bounds: a document or key set is fetched again at least every day, and at most once a minute. */
export const MIN_FRESH_MS = 60_000;
export const MAX_FRESH_MS = 24 * 3600_000;
/** Without caching headers. */
export const DEFAULT_FRESH_MS = 10 * 60_000;

/** How long a fetched document or key set stays fresh, from its HTTP caching headers, within the bounds. */
export function freshnessMs(headers: FetchedJson["headers"], now: number): number {
  const cacheControl = (headers["cache-control"] ?? "").toLowerCase();
  const directive = (name: string) => new RegExp(`(?:^|,)\\s*${name}\\s*=\\s*"?(\\d+)`).exec(cacheControl)?.[1];
  let ms: number;
  if (/(?:^|,)\s*(no-store|no-cache)\b/.test(cacheControl)) ms = 0;
  else if (directive("s-maxage") ?? directive("max-age")) {
    const age = Number(headers.age ?? 0);
    ms = (Number(directive("s-maxage") ?? directive("max-age")) - (Number.isFinite(age) ? age : 0)) * 1000;
  } else if (headers.expires) {
    const expires = Date.parse(headers.expires);
    const date = headers.date ? Date.parse(headers.date) : now;
    ms = Number.isNaN(expires) ? 0 : expires - (Number.isNaN(date) ? now : date);
  } else ms = DEFAULT_FRESH_MS;
  return Math.min(MAX_FRESH_MS, Math.max(MIN_FRESH_MS, ms));
}
