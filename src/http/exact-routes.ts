// Endpoints found by their exact method and path, before the browser session and the routers.
//
// A request for the token endpoint otherwise walks the browser session's middleware and every
// router in turn: each router matches the path against all of its routes, builds that request's
// chain of matching layers and composes it, and its allowedMethods runs after. POST /token is the
// one endpoint every MCP client calls again and again (each refresh, each code exchange): taking it
// out of that walk, with the security headers reading the answer's type from the response, cut the
// broker's CPU per refresh by about a tenth in bench rows (d) and (h) (paired rounds).
//
// The routers keep the same routes, with the same handlers: what this table does not take (another
// method, a trailing slash, other letter case, OPTIONS) they answer as before, 405 and Allow
// included. An exact route answers; it never passes the request on.
import type Koa from "koa";

export interface ExactRoute {
  readonly method: string;
  /** The request paths it answers, exactly as Koa's ctx.path gives them. */
  readonly paths: readonly string[];
  /** The route's handlers, as the router has them. */
  readonly handle: Koa.Middleware;
}

const answered = (): Promise<void> => Promise.resolve();

export function exactRoutes(routes: readonly ExactRoute[]): Koa.Middleware {
  // By path, then method: a lookup allocates nothing.
  const byPath = new Map<string, Map<string, ExactRoute>>();
  for (const route of routes) {
    for (const path of route.paths) {
      const methods = byPath.get(path) ?? new Map<string, ExactRoute>();
      if (methods.has(route.method)) throw new Error(`two exact routes for ${route.method} ${path}`);
      methods.set(route.method, route);
      byPath.set(path, methods);
    }
  }
  return (ctx, next) => {
    const route = byPath.get(ctx.path)?.get(ctx.method);
    if (!route) return next();
    // The pattern for the request span, as a router leaves it: these paths are their own pattern.
    ctx.state.route = ctx.path;
    return route.handle(ctx, answered);
  };
}
