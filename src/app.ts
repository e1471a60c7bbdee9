// Builds the Koa application: middleware order and the routers, nothing else.
import type Koa from "koa";
import type Router from "@koa/router";
import type { Config } from "./config/load.ts";
import type { Logger } from "./logger.ts";
import { requestContext } from "./http/request-context.ts";
import { publicPaths } from "./http/public-paths.ts";
import { securityHeaders } from "./http/security-headers.ts";
import { errorHandler } from "./http/error-handler.ts";
import { browserSession } from "./http/browser-session.ts";
import { cookieKeys } from "./crypto/keys.ts";
import { requestSpans } from "./http/request-span.ts";
import { activeTracer } from "./telemetry/span.ts";
import { BrokerApplication } from "./http/koa-application.ts";
import { exactRoutes, type ExactRoute } from "./http/exact-routes.ts";

export interface AppParts {
  readonly config: Config;
  readonly logger: Logger;
  /** The MCP endpoint (PUBLIC_URL/mcp and below), before the routers: it passes every other path on. */
  readonly mcp?: Koa.Middleware;
  /** Endpoints found by exact method and path before the browser session and the routers, which hold them too (http/exact-routes.ts). */
  readonly exact?: readonly ExactRoute[];
  /** The routers, in order. */
  readonly routers: readonly Router[];
  /** Counts and times every request (http/metrics.ts); runs first, so it sees the final status. */
  readonly metrics?: Koa.Middleware;
}

export function createApp({ config, logger, mcp, exact, routers, metrics }: AppParts): Koa {
  const app = new BrokerApplication({ proxy: config.trustProxy });
  // Errors are handled (and logged with their request id) by errorHandler; Koa's own stderr
  // printing would duplicate them and could leak details.
  app.silent = true;
  if (metrics) app.use(metrics);
  // Only when tracing is on: without it, requests pay nothing for it.
  const tracer = activeTracer();
  if (tracer) app.use(requestSpans(tracer));
  const mcpPaths = publicPaths(config.publicUrl, "/mcp");
  app.use(requestContext(logger, ["/healthz", "/readyz"], mcpPaths));
  app.use(securityHeaders({ https: config.publicUrl.startsWith("https:"), apiPaths: mcpPaths }));
  app.use(errorHandler({ frontPage: `${config.publicUrl}/` }));
  // After the error handler (their errors are rendered as every route's are); they need no session.
  if (exact?.length) app.use(exactRoutes(exact));
  const https = config.publicUrl.startsWith("https:");
  app.use(browserSession(app, { https, keys: cookieKeys(config.secretKey, config.previousSecretKeys), without: mcpPaths }));
  if (mcp) app.use(mcp);
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
