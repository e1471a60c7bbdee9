// The connected-apps page, PUBLIC_URL/account: wires its handlers, nothing else. Its upstream
// sign-in comes back through /oauth/callback (oauth/callback.ts), which hands it to
// sign-in-callback.ts.
import Router from "@koa/router";
import { publicPaths } from "../http/public-paths.ts";
import type { AccountDeps } from "./deps.ts";
import { accountPageHandler } from "./page.ts";
import { accountActionHandler } from "./actions.ts";
import { accountConnectActionHandler, accountConnectPageHandler } from "./connect.ts";

export type { AccountDeps } from "./deps.ts";

export function accountRouter(deps: AccountDeps): Router {
  const router = new Router();
  const paths = publicPaths(deps.publicUrl, "/account");
  router.get(paths, accountPageHandler(deps)).post(paths, accountActionHandler(deps));
  if (deps.connect) {
    const connectPaths = publicPaths(deps.publicUrl, "/account/connect/:name");
    router.get(connectPaths, accountConnectPageHandler(deps, deps.connect)).post(connectPaths, accountConnectActionHandler(deps, deps.connect));
  }
  return router;
}
