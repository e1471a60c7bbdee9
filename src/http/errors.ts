// Typed errors of the HTTP layer that the error middleware turns into responses: OAuth JSON for
// protocol endpoints, a safe HTML page for browser pages. The domain's own errors live in
// grants/errors.ts; anything else is an unexpected error: logged, answered 500.

import type { OAuthErrorCode } from "../grants/errors.ts";

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
 * An error of the HTTP layer itself (client authentication, body parsing, bearer challenges):
 * where the status or headers are the point. Domain errors (grants/errors.ts) carry only a code.
 */
export class OAuthError extends Error {
  readonly status: number;
  readonly headers: Record<string, string>;
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    options: { status?: number; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(`${code}: ${description}`, { cause: options.cause });
    this.name = "OAuthError";
    this.status = options.status ?? statusOf(code);
    this.headers = options.headers ?? {};
  }
}

/** An error shown to a person in the browser: what went wrong and what to do. */
export class PageError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    readonly detail: string,
    readonly hint?: string,
  ) {
    super(`${title}: ${detail}`);
    this.name = "PageError";
  }
}

/** How errors of a route are rendered. Routers set ctx.state.errorFormat. */
export type ErrorFormat = "oauth" | "page" | "jsonrpc";
