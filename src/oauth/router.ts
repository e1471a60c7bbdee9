// The authorization server toward MCP clients: wires the endpoint handlers, nothing else.
import { registrationPolicyOf } from "../grants/client-metadata.ts";
import Router from "@koa/router";
import type Koa from "koa";
import type { Config } from "../config/load.ts";
import type { TokenIssuer, UpstreamLoginStarter } from "../grants/ports.ts";
import type { ClientRegistry } from "../grants/clients.ts";
import type { AuthorizationTransactions } from "../grants/transactions.ts";
import type { Consents } from "../grants/consents.ts";
import type { BrowserIdentities } from "../grants/browser-identities.ts";
import type { ClientAuthentication } from "../grants/client-authentication.ts";
import { cors } from "../http/cors.ts";
import type { ExactRoute } from "../http/exact-routes.ts";
import { publicPathPrefix, publicPaths } from "../http/public-paths.ts";
import { rateLimit, type RequestCounter } from "../http/rate-limit.ts";
import { authorizationServerMetadata, protectedResourceMetadata, serveJson } from "./metadata.ts";
import { defaultServer } from "../config/catalogue.ts";
import { registerHandler } from "./register.ts";
import { authorizeHandler } from "./authorize.ts";
import { consentDecisionHandler, consentPageHandler } from "./consent.ts";
import type { ConnectStepDeps } from "./connect-step.ts";
import { tokenHandler } from "./token.ts";
import { revokeHandler } from "./revoke.ts";
import { introspectHandler } from "./introspect.ts";
import { jwksHandler } from "./jwks.ts";
import type { SigningKeys } from "../grants/signing-keys.ts";

/** What the endpoints use of the grants services (createGrants builds them all). */
export interface AuthorizationServerDeps {
  readonly config: Config;
  readonly clients: ClientRegistry;
  /** Client authentication at /token, /revoke and /introspect (secrets, client assertions). */
  readonly clientAuthentication: ClientAuthentication;
  readonly transactions: AuthorizationTransactions;
  readonly consents: Consents;
  readonly tokens: TokenIssuer;
  readonly upstreamLogin: UpstreamLoginStarter;
  /** Who signed in upstream in each browser: the consent page names them and offers "Not you?". */
  readonly browserIdentities: BrowserIdentities;
  /** Counts registrations per client address (grants/rate-limit.ts: REGISTRATION_RATE_LIMIT). */
  readonly registrationLimit: RequestCounter;
  /** Published at /.well-known/jwks.json. */
  readonly signingKeys: SigningKeys;
  /** Connected accounts: the consent page's connect step after the sign-in. */
  readonly connectStep?: ConnectStepDeps | undefined;
}

/** The metadata documents: RFC 8414's for the issuer, RFC 9728's for each protected server, the key set. */
function metadataRoutes(router: Router, config: Config, signingKeys: SigningKeys): void {
  const issuer = config.publicUrl;
  const asMetadata = serveJson(() => authorizationServerMetadata(config, config.dynamicRegistration));
  const metadataCors = cors({ methods: "GET, OPTIONS" });
  const issuerPath = publicPathPrefix(issuer);
  const at = (path: string): string[] => publicPaths(issuer, path);

  const asPaths = [
    ...at("/.well-known/oauth-authorization-server"),
    // RFC 8414 §3.1: for an issuer with a path, the well-known segment goes before the path.
    ...(issuerPath ? [`/.well-known/oauth-authorization-server${issuerPath}`] : []),
  ];
  // CORS per method (not router.all) so that other methods still get 405 from allowedMethods().
  router.options(asPaths, metadataCors).get(asPaths, metadataCors, asMetadata);
  // Each server's RFC 9728 metadata, looked up in the catalogue at every request (a reload may
  // change it). The default server also answers at /mcp and at the root, naming PUBLIC_URL/mcp.
  const prPaths = (resourcePath: string) => [
    ...at(`/.well-known/oauth-protected-resource${resourcePath}`),
    // RFC 9728 §3.1: the same insertion rule as for the issuer.
    ...(issuerPath ? [`/.well-known/oauth-protected-resource${issuerPath}${resourcePath}`] : []),
  ];
  const atDefault = serveJson(() => {
    const server = defaultServer(config.catalogue);
    return server ? protectedResourceMetadata(config, server, `${config.publicUrl}/mcp`) : undefined;
  });
  const named = serveJson((ctx) => {
    const server = config.catalogue.servers.find((s) => s.path === `/mcp/${ctx.params.name}`);
    return server ? protectedResourceMetadata(config, server) : undefined;
  });
  const defaultPaths = [...prPaths(""), ...prPaths("/mcp")];
  router.options(defaultPaths, metadataCors).get(defaultPaths, metadataCors, atDefault);
  router.options(prPaths("/mcp/:name"), metadataCors).get(prPaths("/mcp/:name"), metadataCors, named);

  const jwksPaths = at("/.well-known/jwks.json");
  router.options(jwksPaths, metadataCors).get(jwksPaths, metadataCors, jwksHandler(signingKeys));
}

/** The authorization server's routes: all in the router, the token endpoint's POST also found by exact path (http/exact-routes.ts). */
export interface AuthorizationServerRoutes {
  readonly router: Router;
  readonly exact: readonly ExactRoute[];
}

export function authorizationServerRoutes(deps: AuthorizationServerDeps): AuthorizationServerRoutes {
  const { config, clients, transactions, consents } = deps;
  const issuer = config.publicUrl;
  const flow = {
    issuer,
    clients,
    transactions,
    consents,
    upstreamLogin: deps.upstreamLogin,
    catalogue: config.catalogue,
  };
  const consent = {
    ...flow,
    browserIdentities: deps.browserIdentities,
    providerKind: config.upstream.provider,
    idleTimeoutSeconds: config.sessionIdleTimeoutSeconds,
    maxAgeSeconds: config.sessionMaxAgeSeconds,
    connectStep: deps.connectStep,
  };

  const router = new Router();
  metadataRoutes(router, config, deps.signingKeys);
  const postCors = cors({ methods: "POST, OPTIONS" });
  // With a path in PUBLIC_URL (https://host/broker) the advertised endpoints live under it; the
  // 2025-03-26 default paths (/authorize, /token, /register) are relative to the origin. Serve both.
  const at = (path: string): string[] => publicPaths(issuer, path);
  const registerLimit = rateLimit(deps.registrationLimit, "registrations");
  router
    .options(at("/register"), postCors)
    .post(at("/register"), postCors, registerLimit, registerHandler(clients, config.dynamicRegistration, registrationPolicyOf(config.clients)));
  const authorize = authorizeHandler(flow);
  router.get(at("/authorize"), authorize).post(at("/authorize"), authorize);
  router.get(at("/consent"), consentPageHandler(consent)).post(at("/consent"), consentDecisionHandler(consent));
  const token = tokenHandler({ clientAuthentication: deps.clientAuthentication, tokens: deps.tokens });
  const tokenEndpoint: Koa.Middleware = (ctx, next) => postCors(ctx, () => token(ctx, next));
  router.options(at("/token"), postCors).post(at("/token"), tokenEndpoint);
  router.options(at("/revoke"), postCors).post(at("/revoke"), postCors, revokeHandler(deps.clientAuthentication, deps.tokens));
  // Server-to-server only (confidential clients): no CORS.
  router.post(at("/introspect"), introspectHandler(deps.clientAuthentication, deps.tokens));
  return { router, exact: [{ method: "POST", paths: at("/token"), handle: tokenEndpoint }] };
}
