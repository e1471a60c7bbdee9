// GET/POST /authorize. First the client and its redirect URI (exact, or a loopback URI on any
// port): when either is wrong the user sees a page and is never redirected. Every later problem is
// sent to the validated redirect URI (error, error_description, state, iss) only when the client
// is trusted: the operator registered it, or this browser already approved it. Anyone can register
// a redirect URI, so for any other client the error is a page too (OAuth 2.1 §7.12.2: no open
// redirector before the user has said anything). A valid request becomes a transaction
// bound to this browser, then goes to the consent page (or straight upstream when this browser
// already approved the same client, redirect URI and scope, and the browser says the person, not
// another site, started this navigation: http/fetch-metadata.ts).
import type Koa from "koa";
import { PageError } from "../grants/errors.ts";
import { paramsToRecord, readForm } from "../http/body.ts";
import { browserSessionId } from "../http/browser-session.ts";
import { setTransactionCookie } from "../http/transaction-cookie.ts";
import { isFirstPartyNavigation } from "../http/fetch-metadata.ts";
import { clientRedirectUrl } from "../grants/client-redirect.ts";
import { matchRedirectUri } from "../grants/redirect-uri.ts";
import { isValidS256Challenge } from "../grants/pkce.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { AuthorizationTransactions } from "../grants/transactions.ts";
import type { Consents } from "../grants/consents.ts";
import type { UpstreamLoginStarter } from "../grants/ports.ts";
import type { RegisteredClient, ValidatedAuthorizationRequest } from "../grants/types.ts";
import { DomainError, InvalidRequest, UnauthorizedClient, UnsupportedResponseType } from "../grants/errors.ts";
import { resolveResource } from "../grants/resource.ts";
import { authorizationScope } from "../grants/scope.ts";
import { serverByResource, type Catalogue } from "../config/catalogue.ts";

export interface AuthorizeDeps {
  readonly issuer: string;
  /** The MCP servers tokens may be asked for, each with its scopes. */
  readonly catalogue: Catalogue;
  readonly clients: ClientRegistry;
  readonly transactions: AuthorizationTransactions;
  readonly consents: Consents;
  readonly upstreamLogin: UpstreamLoginStarter;
}

const START_AGAIN = "Go back to the application you came from and try to connect again. If this keeps happening, tell the application's developer.";

/** The client and redirect URI checks that decide whether redirecting is safe at all. */
async function trustedTarget(params: Record<string, string>, clients: ClientRegistry): Promise<{ client: RegisteredClient; redirectUri: string }> {
  const clientId = params.client_id;
  if (!clientId)
    throw new PageError(
      "invalid_request",
      "Missing client",
      "The authorization request does not say which application is asking (client_id is missing).",
      START_AGAIN,
    );
  // A Client ID Metadata Document URL is fetched (again when stale); a refusal is a page too.
  const client = await clients.forAuthorization(clientId);
  if (!client)
    throw new PageError("invalid_request", "Unknown application", "The application that sent you here is not registered with this server.", START_AGAIN);
  const requested = params.redirect_uri;
  if (requested === undefined) {
    if (client.redirectUris.length === 1) return { client, redirectUri: client.redirectUris[0]! };
    throw new PageError("invalid_request", "Missing redirect address", "The request does not say where to return to (redirect_uri is missing).", START_AGAIN);
  }
  // Exact string match against the registration (spec §5.3, OAuth 2.1 §4.1.1), any port for a
  // loopback URI (OAuth 2.1 §8.4.2, RFC 8252 §7.3).
  const redirectUri = matchRedirectUri(client.redirectUris, requested);
  if (redirectUri === null) {
    throw new PageError(
      "invalid_request",
      "Unregistered redirect address",
      // The address as sent (shown escaped, shortened): what the application's developer compares with the registration.
      `The address this request wants to return to, ${requested.length > 200 ? `${requested.slice(0, 200)}…` : requested}, is not registered for the application, so you were not sent there.`,
      START_AGAIN,
    );
  }
  return { client, redirectUri };
}

/** Whether errors may go to the client's redirect URI: an operator's client, or one this browser approved. */
async function mayRedirectErrors(ctx: Koa.Context, client: RegisteredClient, consents: Consents): Promise<boolean> {
  if (client.registrationType === "manual") return true;
  const sid = browserSessionId(ctx, false);
  return sid !== null && (await consents.approvedBefore(sid, client.id));
}

const ERROR_TITLES: Readonly<Record<string, string>> = {
  invalid_request: "Invalid authorization request",
  unsupported_response_type: "Unsupported authorization request",
  unauthorized_client: "Application not allowed to ask",
  invalid_scope: "Unsupported permissions requested",
  invalid_target: "Unknown service requested",
};

function validate(
  params: Record<string, string>,
  client: RegisteredClient,
  redirectUri: string,
  deps: AuthorizeDeps,
  protocolVersion: string | null,
): ValidatedAuthorizationRequest {
  if (!params.response_type) throw new InvalidRequest("response_type is required (response_type=code).");
  if (params.response_type !== "code") throw new UnsupportedResponseType("Only response_type=code is supported.");
  if (!client.grantTypes.includes("authorization_code")) throw new UnauthorizedClient("This client is not registered for the authorization_code grant.");
  if (!params.code_challenge) throw new InvalidRequest("code_challenge is required (PKCE with S256).");
  if (params.code_challenge_method !== "S256") throw new InvalidRequest("code_challenge_method must be S256.");
  if (!isValidS256Challenge(params.code_challenge)) throw new InvalidRequest("code_challenge is not a valid S256 challenge.");
  if (params.state !== undefined && params.state.length > 2048) throw new InvalidRequest("state is too long.");
  // The server first: what may be asked for is what that server understands.
  const resource = resolveResource(params.resource, { publicUrl: deps.issuer, servers: deps.catalogue.servers });
  const { scopes } = serverByResource(deps.catalogue, resource)!;
  return {
    clientId: client.id,
    redirectUri,
    codeChallenge: params.code_challenge,
    codeChallengeMethod: "S256",
    scope: authorizationScope(params.scope, client.scope, scopes.supported, scopes.implies),
    resource,
    state: params.state ?? null,
    protocolVersion,
  };
}

export function authorizeHandler(deps: AuthorizeDeps): Koa.Middleware {
  return async (ctx) => {
    ctx.state.errorFormat = "page";
    ctx.set("Cache-Control", "no-store");
    const params = ctx.method === "POST" ? await readForm(ctx) : paramsToRecord(new URLSearchParams(ctx.querystring));
    const { client, redirectUri } = await trustedTarget(params, deps.clients);
    const protocolVersion = (ctx.get("mcp-protocol-version") || ctx.get("context-protocol-version") || "").slice(0, 40) || null;
    let request: ValidatedAuthorizationRequest;
    try {
      request = validate(params, client, redirectUri, deps, protocolVersion);
    } catch (err) {
      if (!(err instanceof DomainError)) throw err;
      if (!(await mayRedirectErrors(ctx, client, deps.consents))) {
        throw new PageError("invalid_request", ERROR_TITLES[err.code] ?? "Invalid authorization request", `${err.description} (${err.code})`, START_AGAIN);
      }
      ctx.redirect(
        clientRedirectUrl(redirectUri, {
          error: err.code,
          error_description: err.description,
          ...(params.state ? { state: params.state } : {}),
          iss: deps.issuer,
        }),
      );
      return;
    }
    const sid = browserSessionId(ctx, true);
    const tx = await deps.transactions.create(request, sid);
    setTransactionCookie(ctx, tx.id, deps.transactions.binding(tx.id), tx.expiresAt);
    if (await deps.consents.given({ browserSessionId: sid, clientId: client.id, redirectUri, scope: request.scope, resource: request.resource })) {
      if (isFirstPartyNavigation(ctx)) {
        await deps.transactions.approveRemembered(tx.id);
        ctx.redirect(await deps.upstreamLogin.start(tx.id));
        return;
      }
      ctx.state.log.info(
        { clientId: client.id, secFetchSite: ctx.get("sec-fetch-site").slice(0, 20) || null, secFetchMode: ctx.get("sec-fetch-mode").slice(0, 20) || null },
        "a remembered consent was not used: this navigation was not started by the person or this broker, so the consent page asks again",
      );
    }
    ctx.redirect(`${deps.issuer}/consent?transaction=${encodeURIComponent(tx.id)}`);
  };
}
