// Demo mode: the embedded demo identity provider, served by the broker itself under
// PUBLIC_URL/demo-idp, with the broker registered as its client.
import Router from "@koa/router";
import type Koa from "koa";
import { callbackUrl, type Config } from "../config/load.ts";
import { purposeKey } from "../crypto/keys.ts";
import { DEMO_CLIENT_ID } from "../upstream/create.ts";
import { demoClientSecret, demoIssuerUrl } from "../services.ts";
import { createDemoIdentityProvider, type DemoIdentityProvider } from "./identity-provider.ts";

export interface MountedDemoIdentityProvider {
  readonly idp: DemoIdentityProvider;
  readonly router: Router;
  close(): Promise<void>;
}

export async function mountDemoIdentityProvider(config: Config): Promise<MountedDemoIdentityProvider> {
  const idp = await createDemoIdentityProvider({
    issuer: demoIssuerUrl(config),
    clients: [{ client_id: DEMO_CLIENT_ID, client_secret: demoClientSecret(config), redirect_uris: [callbackUrl(config.publicUrl)] }],
    cookieKeys: [Buffer.from(purposeKey(config.secretKey, "demo-idp-cookies/v1")).toString("base64url")],
  });
  const prefix = new URL(demoIssuerUrl(config)).pathname;
  const forward: Koa.Middleware = async (ctx) => {
    // The IdP is a Koa app of its own: hand it the raw request with the mount path stripped.
    const original = ctx.req.url ?? "/";
    ctx.req.url = original.slice(prefix.length) || "/";
    // oidc-provider derives its mount path (and so every URL it advertises) from originalUrl.
    (ctx.req as typeof ctx.req & { originalUrl?: string }).originalUrl = original;
    ctx.respond = false;
    try {
      await idp.handle(ctx.req, ctx.res);
    } finally {
      ctx.req.url = original;
    }
  };
  const router = new Router();
  router.all(prefix, forward);
  router.all(`${prefix}/{*rest}`, forward);
  return { idp, router, close: async () => undefined };
}
