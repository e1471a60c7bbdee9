// The upstream IdP's one redirect URI (/oauth/callback) serves several sign-ins: a client's
// authorization (oauth/callback.ts) and the connected-apps page's own (account/). Each other
// sign-in is a branch the callback asks first, recognized by the state it sent upstream.
import type Koa from "koa";

/** Another sign-in that comes back through this callback, recognized by the state it sent upstream. */
export interface CallbackBranch {
  owns(state: string): Promise<boolean>;
  /** Completes the sign-in and sets the response. */
  complete(ctx: Koa.Context, callbackUrl: URL): Promise<void>;
}
