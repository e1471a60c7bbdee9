// The browser session: a signed, HttpOnly cookie that holds only a random id. What is remembered
// for "this browser" (consents, who signed in) is stored server-side under that id. A pending
// authorization is bound to the browser by a cookie of its own (transaction-cookie.ts).
import type Koa from "koa";
import session from "koa-session";
import { BROWSER_SESSION_ID, newBrowserSessionId } from "../grants/browser-identities.ts";
import { isUnder } from "./public-paths.ts";

export interface BrowserSessionOptions {
  readonly https: boolean;
  /** Signing keys (newest first); see cookieKeys() in crypto/keys.ts. */
  readonly keys: readonly string[];
  /**
   * Request paths (and below) that never use the browser session: the MCP endpoint, an API called
   * with bearer tokens. Each of its requests then saves koa-session's frame and the objects it makes,
   * and an open event stream no longer keeps them for as long as it stays open.
   */
  readonly without?: readonly string[];
}

export function browserSessionCookieName(https: boolean): string {
  // __Host- binds the cookie to this exact origin (Secure, Path=/, no Domain) whenever we can.
  return https ? "__Host-mab_session" : "mab_session";
}

/** Whether this request's cookies are Secure ones (PUBLIC_URL is https), as browserSession was told. */
const httpsOf = new WeakMap<Koa.Context, boolean>();

export function secureCookies(ctx: Koa.Context): boolean {
  return httpsOf.get(ctx) ?? false;
}

/** Installs koa-session on the app. Call once, before the routers that use browser sessions. */
export function browserSession(app: Koa, options: BrowserSessionOptions): Koa.Middleware {
  app.keys = [...options.keys];
  const sessions = session(
    {
      key: browserSessionCookieName(options.https),
      // As long as a remembered consent lives (grants/consents.ts).
      maxAge: 30 * 24 * 60 * 60 * 1000,
      httpOnly: true,
      signed: true,
      secure: options.https,
      sameSite: "lax",
      overwrite: true,
      rolling: false,
      renew: true,
    },
    app,
  );
  const without = options.without ?? [];
  return (ctx, next) => {
    if (isUnder(without, ctx.path)) return next();
    httpsOf.set(ctx, options.https);
    // PUBLIC_URL is https, so browsers reach us over TLS even when a proxy in front terminates it
    // (without TRUST_PROXY Koa would refuse to set a Secure cookie on the plain hop).
    if (options.https) (ctx.cookies as unknown as { secure: boolean }).secure = true;
    return sessions(ctx, next);
  };
}

interface SessionData {
  sid?: string;
  /** The name of the application just disconnected, for the page after the redirect (read once). */
  revokedApp?: string;
}

const sessionOf = (ctx: Koa.Context) => (ctx as unknown as { session: SessionData | null }).session;

/**
 * Keeps the name of the application just disconnected in this browser's session cookie, for the
 * page the browser is sent to next: not in the redirect's query, where a link could make the page
 * say that any name was disconnected.
 */
export function rememberRevokedApp(ctx: Koa.Context, name: string | undefined): void {
  const data = sessionOf(ctx);
  if (data && name) data.revokedApp = name.slice(0, 100);
}

/** The name rememberRevokedApp kept, once. */
export function takeRevokedApp(ctx: Koa.Context): string | undefined {
  const data = sessionOf(ctx);
  const name = typeof data?.revokedApp === "string" ? data.revokedApp : undefined;
  if (data && "revokedApp" in data) delete data.revokedApp;
  return name;
}

/** The id of this browser's session; created (and the cookie set) when `create` is true. */
export function browserSessionId(ctx: Koa.Context, create: true): string;
export function browserSessionId(ctx: Koa.Context, create: false): string | null;
export function browserSessionId(ctx: Koa.Context, create: boolean): string | null {
  const data = (ctx as unknown as { session: SessionData | null }).session;
  if (!data) return null;
  if (typeof data.sid === "string" && BROWSER_SESSION_ID.test(data.sid)) return data.sid;
  if (!create) return null;
  data.sid = newBrowserSessionId();
  return data.sid;
}

/**
 * Moves this browser to another session id (set in its cookie with this answer): the id a sign-in
 * made (grants/browser-identities.ts), or a fresh one when signing out. Whatever was bound to the
 * old id stays behind with it.
 */
export function useBrowserSessionId(ctx: Koa.Context, sid: string = newBrowserSessionId()): void {
  const data = (ctx as unknown as { session: SessionData | null }).session;
  if (data && BROWSER_SESSION_ID.test(sid)) data.sid = sid;
}
