// Typed errors that the error middleware turns into responses: OAuth JSON for protocol endpoints,
// a safe HTML page for browser pages. Anything else is an unexpected error: logged, answered 500.

export type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "invalid_grant"
  | "unauthorized_client"
  | "unsupported_grant_type"
  | "invalid_scope"
  | "invalid_target"
  | "access_denied"
  | "unsupported_response_type"
  | "server_error"
  | "temporarily_unavailable"
  | "invalid_redirect_uri"
  | "invalid_client_metadata"
  | "invalid_token"
  | "insufficient_scope"
  | "unsupported_token_type";

const DEFAULT_STATUS: Partial<Record<OAuthErrorCode, number>> = {
  invalid_client: 401,
  invalid_token: 401,
  insufficient_scope: 403,
  access_denied: 403,
  server_error: 500,
  temporarily_unavailable: 503,
};

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
    this.status = options.status ?? DEFAULT_STATUS[code] ?? 400;
    this.headers = options.headers ?? {};
  }

  toJSON(): { error: OAuthErrorCode; error_description: string } {
    return { error: this.code, error_description: this.description };
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
