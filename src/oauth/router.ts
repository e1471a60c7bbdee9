// The authorization server toward MCP clients: wires the endpoint handlers, nothing else.
import Router from "@koa/router";
import type Koa from "koa";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { Database } from "../store/db.ts";
import { purposeKey, type SecretBox } from "../store/secrets.ts";
import type { TokenIssuer, UpstreamLoginStarter } from "../grants/ports.ts";
import { ClientRegistry } from "../grants/clients.ts";
import { AuthorizationTransactions } from "../grants/transactions.ts";
import { Consents } from "../grants/consents.ts";
import { cors } from "../http/cors.ts";
import { rateLimit } from "../http/rate-limit.ts";
import { authorizationServerMetadata, protectedResourceMetadata, serveJson } from "./metadata.ts";
import { registerHandler } from "./register.ts";
import { authorizeHandler } from "./authorize.ts";
import { consentDecisionHandler, consentPageHandler } from "./consent.ts";
import { tokenHandler } from "./token.ts";
import { revokeHandler } from "./revoke.ts";
import { introspectHandler } from "./introspect.ts";

export interface AuthorizationServerDeps {
  readonly app: Koa;
  readonly config: Config;
  readonly logger: Logger;
  readonly database: Database;
  readonly secrets: SecretBox;
  readonly tokens: TokenIssuer;
  readonly upstreamLogin: UpstreamLoginStarter;
}

export function authorizationServerRouter(deps: AuthorizationServerDeps): Router {
  const { config } = deps;
  const db = deps.database.db;
  const clients = new ClientRegistry(db);
  const transactions = new AuthorizationTransactions(db, purposeKey(config.secretKey, "consent-csrf/v1"));
  const consents = new Consents(db);
  const issuer = config.publicUrl;
  const flow = { issuer, clients, transactions, consents, upstreamLogin: deps.upstreamLogin };

  const router = new Router();
  const asMetadata = serveJson(() => authorizationServerMetadata(config, config.dynamicRegistration));
  const prMetadata = serveJson(() => protectedResourceMetadata(config));
  const metadataCors = cors({ methods: "GET, OPTIONS" });
  const postCors = cors({ methods: "POST, OPTIONS" });
  const issuerPath = new URL(issuer).pathname.replace(/\/$/, "");

  // RFC 8414 §3: with a path in the issuer, the well-known segment goes before it.
  for (const path of ["/.well-known/oauth-authorization-server", ...(issuerPath ? [`/.well-known/oauth-authorization-server${issuerPath}`] : [])]) {
    router.all(path, metadataCors).get(path, asMetadata);
  }
  for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]) {
    router.all(path, metadataCors).get(path, prMetadata);
  }
  router.all("/register", postCors, rateLimit({ limit: 20, windowMs: 60_000, what: "registrations" })).post("/register", registerHandler(clients, config.dynamicRegistration));
  router.get("/authorize", authorizeHandler({ ...flow, resource: config.resourceUrl }));
  router.post("/authorize", authorizeHandler({ ...flow, resource: config.resourceUrl }));
  router.get("/consent", consentPageHandler(flow));
  router.post("/consent", consentDecisionHandler(flow));
  router.all("/token", postCors).post("/token", tokenHandler({ resource: config.resourceUrl, clients, tokens: deps.tokens }));
  router.all("/revoke", postCors).post("/revoke", revokeHandler(clients, deps.tokens));
  router.post("/introspect", introspectHandler(clients, deps.tokens));
  return router;
}
