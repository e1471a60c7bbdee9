// Turns whatever an upstream call threw (openid-client / oauth4webapi errors, fetch failures,
// timeouts, HTTP statuses) into an UpstreamError whose kind decides what the broker does.
import { UpstreamError } from "./provider.ts";
import { describeNetworkFailure } from "../lib/network-failure.ts";
import { OutboundFetchError } from "../outbound/fetch-error.ts";

interface ErrorShape {
  name?: string;
  code?: string;
  error?: string;
  status?: number;
  cause?: unknown;
  message?: string;
}

const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ENOTFOUND",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ETIMEDOUT",
  "EAI_AGAIN",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_SOCKET",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

/** The address policy's refusal somewhere in the cause chain (an IdP at a cloud metadata address). */
export function refusedAddress(err: unknown): OutboundFetchError | undefined {
  let e = err as ErrorShape | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (e instanceof OutboundFetchError && e.kind === "refused-address") return e;
    e = e.cause as ErrorShape | undefined;
  }
  return undefined;
}

export function isNetworkFailure(err: unknown): boolean {
  let e = err as ErrorShape | undefined;
  for (let depth = 0; e && depth < 4; depth++) {
    if (e.name === "AbortError" || e.name === "TimeoutError") return true;
    if (e.code && NETWORK_CODES.has(e.code)) return true;
    if (e.name === "TypeError" && /fetch failed|terminated|network/i.test(e.message ?? "")) return true;
    e = e.cause as ErrorShape | undefined;
  }
  return false;
}

/** Maps an OAuth error code (RFC 6749 §5.2) or HTTP status to a failure kind. */
export function kindOf(oauthError: string | undefined, status: number | undefined): UpstreamError["kind"] {
  if (status !== undefined && status >= 500) return "unavailable";
  switch (oauthError) {
    case "invalid_grant":
    case "invalid_token":
      return "invalid_grant";
    case "access_denied":
      return "denied";
    case "invalid_client":
    case "unauthorized_client":
    case "redirect_uri_mismatch":
    case "incorrect_client_credentials":
      return "misconfigured";
    case "temporarily_unavailable":
    case "server_error":
      return "unavailable";
  }
  if (status === 401) return "invalid_grant";
  return "protocol";
}

const HINTS: Partial<Record<UpstreamError["kind"], string>> = {
  misconfigured:
    "check UPSTREAM_CLIENT_ID, UPSTREAM_CLIENT_SECRET and that PUBLIC_URL/oauth/callback is registered as the redirect URI at the identity provider",
  unavailable: "the identity provider is unreachable, slow or failing",
};

/** `setting`: where the identity provider's address is configured, for the fix of a network failure. */
export function classifyFailure(err: unknown, what: string, setting = "UPSTREAM_ISSUER"): UpstreamError {
  if (err instanceof UpstreamError) return err;
  const refused = refusedAddress(err);
  if (refused) return new UpstreamError("misconfigured", `${what}: ${refused.message}; check ${setting}`, { cause: err });
  if (isNetworkFailure(err)) {
    const why = describeNetworkFailure(err, "the identity provider", setting) ?? HINTS.unavailable;
    return new UpstreamError("unavailable", `${what}: ${why}`, { cause: err });
  }
  const e = err as ErrorShape;
  // A 401 with WWW-Authenticate carries the OAuth error in its parsed challenges (`cause`).
  const challenges = Array.isArray(e.cause) ? (e.cause as Array<{ parameters?: { error?: string } }>) : [];
  const oauthError = typeof e.error === "string" ? e.error : challenges.find((c) => c.parameters?.error)?.parameters?.error;
  // oauth4webapi puts the HTTP response in `cause` when the status itself was unexpected.
  const status = e.status ?? (e.cause as ErrorShape | undefined)?.status;
  const kind = kindOf(oauthError, status);
  const detail = oauthError ?? e.code ?? e.message ?? "unknown error";
  const hint = HINTS[kind];
  return new UpstreamError(kind, `${what}: ${detail}${hint ? ` (${hint})` : ""}`, { cause: err });
}
