// The cookie that binds one pending authorization (or sign-in at the connected-apps page) to the
// browser that started it: only that browser may see and answer its consent page and bring back
// its upstream callback. One cookie per transaction, its name carrying the transaction id (as
// node-oidc-provider keeps a cookie per interaction), so authorizations started together in one
// browser do not replace each other's binding: VS Code and Cursor connect their servers at once,
// claude.ai registers twice per attempt, and a fresh browser answers each of their first requests
// with a session of its own; and a sign-in, which gives the browser a new session id, cancels no
// other pending one. The value is the transaction's binding (grants/transactions.ts,
// grants/account-sign-in.ts), an HMAC nobody can make without the server's key, after the time it
// was set (for eviction). A cookie lives as long as its transaction and is removed when the
// transaction ends; a browser that holds more than MAX_TRANSACTION_COOKIES loses the oldest ones
// (their authorizations then end on a page saying so).
import type Koa from "koa";
import { secureCookies } from "./browser-session.ts";

const PREFIX = "mab_tx_";
/** Pending authorizations one browser keeps at once: far above what several clients start together. */
export const MAX_TRANSACTION_COOKIES = 20;

function cookieName(ctx: Koa.Context, transactionId: string): string {
  // __Host- whenever the cookie is Secure, like the session cookie: this origin only, Path=/.
  return `${secureCookies(ctx) ? "__Host-" : ""}${PREFIX}${transactionId}`;
}

function options(ctx: Koa.Context, maxAge?: number) {
  // Path=/: the consent page and the upstream callback both need it (and __Host- requires it).
  return { httpOnly: true, sameSite: "lax" as const, secure: secureCookies(ctx), path: "/", overwrite: true, signed: false, ...(maxAge ? { maxAge } : {}) };
}

/** The transaction cookies this request carries: name and when each was set (ms), oldest first. */
function carried(ctx: Koa.Context): Array<{ name: string; setAt: number }> {
  const prefix = cookieName(ctx, "");
  const found: Array<{ name: string; setAt: number }> = [];
  for (const pair of (ctx.get("cookie") || "").split(";")) {
    const i = pair.indexOf("=");
    const name = pair.slice(0, i).trim();
    if (i < 0 || !name.startsWith(prefix)) continue;
    const setAt = Number.parseInt(
      pair
        .slice(i + 1)
        .trim()
        .split(".")[0] ?? "",
      36,
    );
    found.push({ name, setAt: Number.isFinite(setAt) ? setAt : 0 });
  }
  return found.sort((a, b) => a.setAt - b.setAt);
}

/** Binds a new transaction to this browser until `expiresAt`, evicting the oldest beyond the limit. */
export function setTransactionCookie(ctx: Koa.Context, transactionId: string, binding: string, expiresAt: Date): void {
  const now = Date.now();
  const held = carried(ctx);
  for (const old of held.slice(0, Math.max(0, held.length - MAX_TRANSACTION_COOKIES + 1))) ctx.cookies.set(old.name, null, options(ctx));
  ctx.cookies.set(cookieName(ctx, transactionId), `${now.toString(36)}.${binding}`, options(ctx, Math.max(1000, expiresAt.getTime() - now)));
}

/** The binding this browser presents for the transaction, or null without its cookie. */
export function transactionBinding(ctx: Koa.Context, transactionId: string): string | null {
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(transactionId)) return null;
  const value = ctx.cookies.get(cookieName(ctx, transactionId), { signed: false });
  const dot = value?.indexOf(".") ?? -1;
  return value && dot >= 0 ? value.slice(dot + 1) : null;
}

/** Removes the cookie of a transaction that has ended. */
export function clearTransactionCookie(ctx: Koa.Context, transactionId: string): void {
  if (ctx.cookies.get(cookieName(ctx, transactionId), { signed: false }) !== undefined) ctx.cookies.set(cookieName(ctx, transactionId), null, options(ctx));
}
