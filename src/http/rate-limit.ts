// Per-address rate limiting of an endpoint: asks the limiter (grants/rate-limit.ts, counted in the
// database so every instance shares it) about the client's address and answers 429 with Retry-After
// when it refuses. Behind a proxy, ctx.ip honours TRUST_PROXY.
import type Koa from "koa";
import type { RateDecision } from "../grants/rate-limit.ts";
import { OAuthError } from "./errors.ts";

export interface RequestCounter {
  take(address: string): Promise<RateDecision>;
}

/** `what` names what is counted, for the 429 message ("registrations"). */
export function rateLimit(counter: RequestCounter, what: string): Koa.Middleware {
  return async (ctx, next) => {
    const decision = await counter.take(ctx.ip);
    if (!decision.allowed) {
      const retry = String(decision.retryAfterSeconds);
      throw new OAuthError("invalid_request", `Too many ${what} from this address; retry in ${retry} s.`, {
        status: 429,
        headers: { "Retry-After": retry },
      });
    }
    await next();
  };
}
