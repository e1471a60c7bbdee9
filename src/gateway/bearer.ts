// Bearer authentication of the protected MCP endpoint (spec §5.4, §7): only the Authorization
// header carries the token; every 401 points at the protected resource metadata; the token must
// have been issued for this resource (audience) and is never passed on.
import type Koa from "koa";
import { OAuthError } from "../http/errors.ts";
import type { RequestState } from "../http/request-context.ts";
import type { AccessValidator, ValidatedAccess } from "../grants/access-validation.ts";
import { CredentialRejected } from "../grants/errors.ts";
import { covers, scopeList, type ScopeImplications } from "../grants/scope.ts";
import { OFFLINE_ACCESS } from "../grants/types.ts";
import type { CallerIdentity } from "../grants/caller-identity.ts";

export interface BearerOptions {
  readonly validator: AccessValidator;
  /** The resource URI tokens must have been issued for (the server of this mount); default PUBLIC_URL/mcp's. */
  readonly resource?: string;
  /** URL of the protected resource metadata (PUBLIC_URL/.well-known/oauth-protected-resource/mcp). */
  readonly resourceMetadataUrl: string;
  /** Scope every request needs. */
  readonly requiredScope: string;
  /** SCOPE_IMPLIES: a granted scope that implies the required one is enough. */
  readonly scopeImplies?: ScopeImplications;
}

export interface BearerState extends RequestState {
  identity: CallerIdentity;
}

const BEARER = /^Bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;
/** A Content-Type that may name a form (ctx.is then decides). */
const FORM = /x-www-form-urlencoded/i;

function quote(value: string): string {
  return `"${value.replace(/[\\"]/g, "\\$&")}"`;
}

/** What a challenge of this endpoint is made of (the bearer middleware's and the proxy's alike). */
export type ChallengeOptions = Pick<BearerOptions, "resourceMetadataUrl" | "requiredScope">;

/**
 * The value of WWW-Authenticate. Its scope never names offline_access: that asks the authorization
 * server for refresh tokens and is no requirement of the resource, so MCP (2026-07-28, "Refresh
 * Tokens") says servers SHOULD NOT put it in a challenge; a client that wants refresh tokens asks
 * for it itself. Whoever builds the challenge (the bearer check, the proxy for the MCP server's own
 * 401/403) gets this.
 */
export function challenge(options: ChallengeOptions, error?: { code: string; description: string; scope?: string }): string {
  const scope = scopeList(error?.scope ?? options.requiredScope).filter((s) => s !== OFFLINE_ACCESS);
  const parts = [`resource_metadata=${quote(options.resourceMetadataUrl)}`, `scope=${quote(scope.length > 0 ? scope.join(" ") : options.requiredScope)}`];
  if (error) parts.push(`error=${quote(error.code)}`, `error_description=${quote(error.description)}`);
  return `Bearer ${parts.join(", ")}`;
}

/** RFC 9110 §11 auth-param: token "=" ( token / quoted-string ). */
const AUTH_PARAM = /^\s*([!#$%&'*+.^_`|~0-9A-Za-z-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([!#$%&'*+.^_`|~0-9A-Za-z-]+))\s*(?:,|$)/;

/**
 * The parameters of the Bearer challenge in a WWW-Authenticate value (RFC 6750 §3), lower-cased
 * names, unquoted values; null when there is no Bearer challenge. Other schemes' challenges before
 * it are skipped; parsing stops at the next scheme.
 */
export function parseBearerChallenge(header: string | readonly string[] | undefined): Record<string, string> | null {
  for (const value of typeof header === "string" ? [header] : (header ?? [])) {
    const at = /(?:^|,)\s*Bearer(?:\s+|$)/i.exec(value);
    if (!at) continue;
    const params: Record<string, string> = {};
    let rest = value.slice(at.index + at[0].length);
    for (let m = AUTH_PARAM.exec(rest); m && rest.length > 0; m = AUTH_PARAM.exec(rest)) {
      params[m[1]!.toLowerCase()] = m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : m[3]!;
      rest = rest.slice(m[0].length);
    }
    return params;
  }
  return null;
}

function identityOf(access: ValidatedAccess): CallerIdentity {
  return {
    subject: access.subject,
    user: access.user,
    clientId: access.clientId,
    scopes: access.scopes,
    grantId: access.grantId,
    facts: access.facts,
    upstreamAccessToken: access.upstreamAccessToken,
    connection: access.connection,
  };
}

export function bearerAuth(options: BearerOptions): Koa.Middleware {
  const reject = (status: number, code: "invalid_request" | "invalid_token" | "insufficient_scope", description: string, scope?: string) =>
    new OAuthError(code, description, {
      status,
      headers: { "WWW-Authenticate": challenge(options, { code, description, ...(scope ? { scope } : {}) }) },
    });

  // Per validated access (the validation cache hands out the same object until the entry ends): the
  // caller's identity, or null when its scopes do not cover the endpoint's. Decided once per entry
  // instead of a set of implied scopes and an identity object per request.
  const decided = new WeakMap<ValidatedAccess, CallerIdentity | null>();

  return async (ctx, next) => {
    // RFC 6750 §2.2/§2.3 token transports are refused: a token in a URL ends up in logs and history.
    if (ctx.querystring && new URLSearchParams(ctx.querystring).has("access_token")) {
      throw reject(400, "invalid_request", "Send the access token in the Authorization header, never in the URL.");
    }
    // The cheap test first: parsing the media type (ctx.is) only for a body that may be a form.
    if (FORM.test(ctx.req.headers["content-type"] ?? "") && ctx.is("application/x-www-form-urlencoded")) {
      throw reject(400, "invalid_request", "Send the access token in the Authorization header, never in the request body.");
    }
    const header = ctx.get("authorization");
    if (!header || !/^Bearer\b/i.test(header)) {
      throw new OAuthError("invalid_request", "Authorization required: send an access token as 'Authorization: Bearer <token>'.", {
        status: 401,
        headers: { "WWW-Authenticate": challenge(options) },
      });
    }
    const match = BEARER.exec(header);
    if (!match) throw reject(401, "invalid_token", "The Authorization header is not a well-formed bearer token.");
    let access: ValidatedAccess;
    try {
      access = await options.validator.validate(match[1]!, { resource: options.resource });
    } catch (err) {
      // The challenge is this endpoint's to give; UpstreamUnavailable goes on to the error
      // handler as it is (503 with Retry-After).
      if (err instanceof CredentialRejected) throw reject(401, "invalid_token", err.reason);
      throw err;
    }
    let identity = decided.get(access);
    if (identity === undefined) {
      identity = covers(access.scopes, [options.requiredScope], options.scopeImplies) ? identityOf(access) : null;
      decided.set(access, identity);
    }
    if (identity === null) {
      throw reject(403, "insufficient_scope", `This endpoint needs the "${options.requiredScope}" scope.`, options.requiredScope);
    }
    ctx.state.identity = identity;
    // Returned, not awaited: this frame is not kept while the request is relayed.
    return next();
  };
}
