// The front door: GET / (PUBLIC_URL, with or without its path) is a small page naming the service,
// the MCP URL to paste into a client, the sign-in it uses and a link to the connected-apps page;
// /favicon.ico answers with an icon drawn in code. HEAD comes with GET (@koa/router). Framing and
// the CSP come from the security-headers middleware like every other page.
import Router from "@koa/router";
import type { Config } from "../config/load.ts";
import { publicPathPrefix, publicPaths } from "../http/public-paths.ts";
import { faviconIco, renderFrontPage } from "../views/front-page.ts";
import { sendHtml } from "../http/html-page.ts";

export interface FrontDoorDeps {
  readonly config: Config;
  /** The upstream IdP's display name. */
  readonly providerName: string;
}

/** Browsers ask for /favicon.ico on every visit: a week before they ask again. */
const ICON_MAX_AGE_SECONDS = 7 * 86400;

export function frontDoorRouter({ config, providerName }: FrontDoorDeps): Router {
  const prefix = publicPathPrefix(config.publicUrl);
  // https://host/broker is the front page too, not only https://host/broker/.
  const home = [...publicPaths(config.publicUrl, "/"), ...(prefix ? [prefix] : [])];
  // Everything on the page comes from the configuration: rendered once per catalogue (a reload
  // replaces the list of servers, and with it the page).
  let rendered: { servers: Config["catalogue"]["servers"]; html: string } | undefined;
  const page = (): string => {
    const { servers } = config.catalogue;
    if (rendered?.servers !== servers) {
      const html = renderFrontPage({
        resourceName: config.resourceName,
        mcpUrl: config.resourceUrl,
        providerName,
        accountUrl: `${config.publicUrl}/account`,
        demoMode: config.demoMode,
        servers: servers.map((s) => ({ title: s.title, description: s.description, url: s.resourceUrl })),
      });
      rendered = { servers, html };
    }
    return rendered.html;
  };

  const router = new Router();
  router.get(home, (ctx) => {
    ctx.state.errorFormat = "page";
    ctx.set("Cache-Control", "public, max-age=300");
    sendHtml(ctx, page());
  });
  router.get(publicPaths(config.publicUrl, "/favicon.ico"), (ctx) => {
    ctx.set("Cache-Control", `public, max-age=${ICON_MAX_AGE_SECONDS}`);
    ctx.type = "image/x-icon";
    ctx.body = faviconIco();
  });
  return router;
}
