// The domain's errors: what went wrong, in OAuth's words, with nothing of HTTP in them. Each one
// carries its OAuth error code (RFC 6749 §5.2, RFC 6750 §3.1, RFC 7591 §3.2.2, RFC 8707) and a
// description that is safe to show. The HTTP layer (http/error-handler.ts) alone decides, from the
// code, the status, the headers and the body of the response.

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

export abstract class DomainError extends Error {
  abstract readonly code: OAuthErrorCode;
  /** Set when the failure is temporary: after how many seconds a retry may succeed. */
  readonly retryAfterSeconds?: number;

  constructor(
    readonly description: string,
    options?: ErrorOptions,
  ) {
    super(description, options);
    this.name = new.target.name;
  }
}

/** A parameter is missing, repeated, malformed or not allowed here. */
export class InvalidRequest extends DomainError {
  readonly code = "invalid_request";
}

/**
 * The client could not be authenticated (RFC 6749 §5.2): unknown, the wrong method, a wrong secret,
 * or a client assertion that does not hold. The HTTP layer adds the challenge header.
 */
export class InvalidClient extends DomainError {
  readonly code = "invalid_client";
}

/** The authorization code or refresh token is invalid, expired, revoked, or its grant is dead. */
export class InvalidGrant extends DomainError {
  readonly code = "invalid_grant";
}

/** The resource (RFC 8707) is not one this broker issues tokens for. */
export class InvalidTarget extends DomainError {
  readonly code = "invalid_target";
}

export class InvalidScope extends DomainError {
  readonly code = "invalid_scope";
}

/** The client may not use this grant (or response type). */
export class UnauthorizedClient extends DomainError {
  readonly code = "unauthorized_client";
}

export class UnsupportedGrantType extends DomainError {
  readonly code = "unsupported_grant_type";
}

export class UnsupportedResponseType extends DomainError {
  readonly code = "unsupported_response_type";
}

/** RFC 7591: a registration's metadata is invalid. */
export class InvalidClientMetadata extends DomainError {
  readonly code = "invalid_client_metadata";
}

/** RFC 7591: a registration's redirect URIs are missing or not allowed. */
export class InvalidRedirectUri extends DomainError {
  readonly code = "invalid_redirect_uri";
}

export class AccessDenied extends DomainError {
  readonly code = "access_denied";
}

/**
 * The presented credential, its grant, or the upstream login behind it is dead. The gateway answers
 * it as invalid_token; the token endpoint as invalid_grant; introspection as inactive.
 */
export class CredentialRejected extends DomainError {
  readonly code = "invalid_token";

  get reason(): string {
    return this.description;
  }
}

/** Something the answer depends on could not be asked in time: fail closed, the client should retry. */
abstract class TemporarilyUnavailable extends DomainError {
  readonly code = "temporarily_unavailable";
  override readonly retryAfterSeconds: number;

  constructor(message: string, retryAfterSeconds = 5) {
    super(message);
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

/** The upstream IdP could not be asked in time. */
export class UpstreamUnavailable extends TemporarilyUnavailable {}

/**
 * The database could not be asked something the answer must not be guessed at (a rate limit's
 * count).
 */
export class StorageUnavailable extends TemporarilyUnavailable {}

/** The codes a page for the person in front of the browser is filed under. */
export type PageErrorCode = "invalid_request" | "access_denied" | "temporarily_unavailable" | "server_error";

/**
 * A failure only the person in front of the browser can act on (a consent or sign-in step, the
 * connected-apps page, a broken authorization request): shown to them as a page with a title, what
 * happened (the description) and what to do (the hint), and never sent to the client application.
 * `status` is set where the page's own status says more than its code does (404 for an application
 * nobody registered, 502 for an identity provider's broken answer).
 */
export class PageError extends DomainError {
  readonly status: number | undefined;

  constructor(
    readonly code: PageErrorCode,
    readonly title: string,
    detail: string,
    readonly hint?: string,
    options: { readonly status?: number } = {},
  ) {
    super(detail);
    this.status = options.status;
  }

  get detail(): string {
    return this.description;
  }
}

const BY_CODE = {
  invalid_request: InvalidRequest,
  invalid_grant: InvalidGrant,
  invalid_target: InvalidTarget,
  invalid_scope: InvalidScope,
  unauthorized_client: UnauthorizedClient,
  unsupported_grant_type: UnsupportedGrantType,
  unsupported_response_type: UnsupportedResponseType,
  invalid_client_metadata: InvalidClientMetadata,
  invalid_redirect_uri: InvalidRedirectUri,
  access_denied: AccessDenied,
} as const;

export type RequestErrorCode = keyof typeof BY_CODE;

/** The typed error for a code a request check reports (e.g. from a parameter schema's issue). */
export function requestError(code: RequestErrorCode, description: string): DomainError {
  return new BY_CODE[code](description);
}

export function isRequestErrorCode(code: unknown): code is RequestErrorCode {
  return typeof code === "string" && Object.hasOwn(BY_CODE, code);
}
