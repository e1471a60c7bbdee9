// Builds the Koa application: middleware order and the routers, nothing else.
import Koa from "koa";
import type Router from "@koa/router";
import type { Config } from "./config.ts";
import type { Logger } from "./logger.ts";
import { requestContext } from "./http/request-context.ts";
import { securityHeaders } from "./http/security-headers.ts";
import { errorHandler } from "./http/error-handler.ts";

export interface AppParts {
  readonly config: Config;
  readonly logger: Logger;
  readonly routers: readonly Router[];
}

export function createApp({ config, logger, routers }: AppParts): Koa {
  const app = new Koa({ proxy: config.trustProxy });
  app.keys = [];
  // Errors are handled (and logged with their request id) by errorHandler; Koa's own stderr
  // printing would duplicate them and could leak details.
  app.silent = true;
  app.use(requestContext(logger));
  app.use(securityHeaders({ https: config.publicUrl.startsWith("https:") }));
  app.use(errorHandler());
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
