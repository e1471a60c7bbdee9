// The authorization server toward MCP clients: wires the endpoint handlers, nothing else.
import Router from "@koa/router";
import type Koa from "koa";
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { Database } from "../store/db.ts";
import type { SecretBox } from "../store/secrets.ts";
import type { TokenIssuer, UpstreamLoginStarter } from "../grants/ports.ts";

export interface AuthorizationServerDeps {
  readonly app: Koa;
  readonly config: Config;
  readonly logger: Logger;
  readonly database: Database;
  readonly secrets: SecretBox;
  readonly tokens: TokenIssuer;
  readonly upstreamLogin: UpstreamLoginStarter;
}

export function authorizationServerRouter(_deps: AuthorizationServerDeps): Router {
  const router = new Router();
  return router;
}
