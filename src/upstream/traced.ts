// The identity provider with a span around each of its calls (the code exchange, a re-check, a
// refresh…), for when tracing is on; the HTTP requests each call makes are its children
// (outbound/pooled-fetch.ts). Calls made outside a request (discovery at start) make no span.
import type { UpstreamProvider } from "./provider.ts";
import { tracedMethods } from "../telemetry/span.ts";

const CALLS = [
  "createAuthorizationRequest",
  "exchangeCode",
  "fetchIdentity",
  "check",
  "refresh",
  "revoke",
  "verifyCredentials",
] as const satisfies readonly (keyof UpstreamProvider)[];

export function tracedProvider(provider: UpstreamProvider): UpstreamProvider {
  return tracedMethods(provider, "upstream", CALLS, { "upstream.provider": provider.kind });
}
