// The hot store with a span around each statement, for when tracing is on (the wiring wraps the
// store then, and only then: the per-token path of a broker without tracing stays as it is).
// Statements run outside any request (the revocation feed's polls) make no span of their own.
import type { HotStore } from "./hot-store.ts";
import { SpanKind, tracedMethods } from "../telemetry/span.ts";

/** Every statement of the interface (listenForRevocations holds a connection open: not a statement). */
const STATEMENTS = [
  "clientById",
  "touchClient",
  "refreshTokenByHash",
  "refreshTokenById",
  "rotateRefreshToken",
  "codeByHash",
  "exchangeCode",
  "accessTokenByHash",
  "recordGrantUse",
  "upstreamSessionById",
  "recordUpstreamCheck",
  "revokedSince",
  "announceRevocation",
  "claimAssertion",
  "mcpSessionOwner",
  "claimMcpSession",
  "releaseMcpSession",
] as const satisfies readonly (keyof HotStore)[];

type Untraced = Exclude<keyof HotStore, (typeof STATEMENTS)[number] | "kind" | "listenForRevocations" | "close">;
/** Does not compile when HotStore gains a statement that is missing above. */
export const everyStatementTraced: [Untraced] extends [never] ? true : Untraced = true;

export function tracedHotStore(store: HotStore): HotStore {
  return tracedMethods(store, "db", STATEMENTS, { "db.system.name": store.kind === "postgres" ? "postgresql" : "sqlite" }, SpanKind.CLIENT);
}
