// The HTTP layer's own error, and the status each OAuth error code is answered with. The domain's
// errors, pages for people included, live in grants/errors.ts; anything else is an unexpected
// error: logged, answered 500.

import { DomainError, type OAuthErrorCode } from "../grants/errors.ts";

export type { OAuthErrorCode };

const STATUS: Partial<Record<OAuthErrorCode, number>> = {
  invalid_client: 401,
  invalid_token: 401,
  insufficient_scope: 403,
  access_denied: 403,
  server_error: 500,
  temporarily_unavailable: 503,
};

/** The HTTP status an OAuth error code is answered with (RFC 6749 §5.2: 400 unless said otherwise). */
export function statusOf(code: OAuthErrorCode): number {
  return STATUS[code] ?? 400;
}

/**
 * An error of the HTTP layer itself (client authentication, body parsing, bearer challenges): where
 * the status or headers are the point (413, 408, 429 with Retry-After, 401 with its challenge). One
 * of the domain's family, so the error middleware has one root to answer; the only one that carries
 * HTTP, which is why it lives here and not in grants/.
 */
export class OAuthError extends DomainError {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(
    readonly code: OAuthErrorCode,
    description: string,
    options: { status?: number; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(description, { cause: options.cause });
    this.status = options.status ?? statusOf(code);
    this.headers = options.headers ?? {};
  }
}

/** How errors of a route are rendered. Routers set ctx.state.errorFormat. */
export type ErrorFormat = "oauth" | "page" | "jsonrpc";
