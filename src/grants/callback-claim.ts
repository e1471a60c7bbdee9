// The claim step every browser sign-in takes when the upstream IdP sends the browser back (a
// client's authorization, the connected-apps page's own sign-in): find the pending sign-in by the
// state it sent, check it is still waiting, in the browser that started it, and not expired, then
// take it — so a second callback (a replay, a double click) finds it taken. Each refusal is a page
// for the person at the browser, never something the client application sees.
import { dateOf, type Clock } from "../lib/clock.ts";
import { PageError } from "./errors.ts";

/**
 * Upstream calls one callback makes at most (code exchange, identity, e-mails), each bounded by
 * UPSTREAM_TIMEOUT_SECONDS; the margin covers the database writes around them.
 */
const UPSTREAM_CALLS_PER_CALLBACK = 3;
const EXCHANGE_MARGIN_MS = 60_000;

/** How long a claimed sign-in may take before it counts as abandoned (then the sweep removes it). */
export function exchangeDeadlineMs(upstreamTimeoutMs: number): number {
  return UPSTREAM_CALLS_PER_CALLBACK * upstreamTimeoutMs + EXCHANGE_MARGIN_MS;
}

/** A pending sign-in as the claim step sees it. */
export interface PendingSignIn {
  readonly id: string;
  readonly expiresAt: Date;
  /** Still waiting for its callback (not completed, failed, or taken by another callback). */
  readonly waiting: boolean;
}

/** Where a kind of sign-in is stored, and how it speaks to the person. */
export interface SignInStore<T extends PendingSignIn> {
  find(state: string): Promise<T | null>;
  /** The binding cookie this browser presents is the one the sign-in was started with. */
  boundHere(row: T): boolean;
  /** Ends a sign-in whose callback was refused; `reason` for the audit trail. */
  abandon(row: T, reason: "browser_mismatch" | "expired"): Promise<void>;
  /** Takes a waiting sign-in, shortening its deadline to `deadline`; false when another took it. */
  take(row: T, deadline: Date): Promise<boolean>;
  /** What the person should do after a refusal (start again where). */
  readonly startAgain: string;
  /** The same, after a callback opened in another browser. */
  readonly startAgainInOneBrowser: string;
  /** What the sign-in is called on the pages ("authorization", "sign-in"). */
  readonly noun: string;
}

export function alreadyUsed(startAgain: string): PageError {
  return new PageError("invalid_request", "Sign-in already used", "This sign-in response was already used, cancelled or interrupted.", startAgain);
}

/** The pending sign-in this callback completes, claimed; or a PageError saying why not. */
export async function claimCallback<T extends PendingSignIn>(
  callbackUrl: URL,
  store: SignInStore<T>,
  clock: Clock,
  upstreamTimeoutMs: number,
): Promise<{ readonly row: T; readonly state: string }> {
  const state = callbackUrl.searchParams.get("state");
  if (!state) throw new PageError("invalid_request", "Invalid sign-in response", "The identity provider's response carries no state.", store.startAgain);
  const row = await store.find(state);
  if (!row)
    throw new PageError("invalid_request", "Unknown sign-in response", `This sign-in response does not belong to any pending ${store.noun}.`, store.startAgain);
  if (!row.waiting) throw alreadyUsed(store.startAgain);
  if (!store.boundHere(row)) {
    // A callback URL that leaked (history, logs, a shared screen) must not complete the sign-in
    // later in the right browser either: any refused callback ends its sign-in.
    await store.abandon(row, "browser_mismatch");
    throw new PageError(
      "access_denied",
      "Sign-in started in another browser",
      "This sign-in response was opened in a different browser (or its cookie is missing) than the one that started it, so it was cancelled.",
      store.startAgainInOneBrowser,
    );
  }
  const now = dateOf(clock);
  if (row.expiresAt <= now) {
    await store.abandon(row, "expired");
    throw new PageError("invalid_request", "Sign-in expired", "This sign-in took too long.", store.startAgain);
  }
  // Its deadline shrinks to what the exchange can take, so a process that dies mid-exchange
  // (kill -9) leaves a row the sweep removes soon after, instead of one that looks alive.
  const deadline = new Date(Math.min(row.expiresAt.getTime(), now.getTime() + exchangeDeadlineMs(upstreamTimeoutMs)));
  if (!(await store.take(row, deadline))) throw alreadyUsed(store.startAgain);
  return { row, state };
}
