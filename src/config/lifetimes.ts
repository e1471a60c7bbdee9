// How long things live and how long the broker waits: tokens, sessions, rechecks, retention.
import { intIn, parseVar } from "./parse-var.ts";
import type { Env } from "./values.ts";

export function parseLifetimes(env: Env) {
  return {
    upstreamRecheckSeconds: parseVar(env, "UPSTREAM_RECHECK_SECONDS", intIn(0, 86400, 30), "a whole number of seconds between 0 and 86400"),
    accessTokenTtlSeconds: parseVar(env, "ACCESS_TOKEN_TTL_SECONDS", intIn(1, 86400, 3600), "a whole number of seconds between 1 and 86400"),
    refreshTokenTtlSeconds: parseVar(env, "REFRESH_TOKEN_TTL_SECONDS", intIn(1, 31536000, 2592000), "a whole number of seconds between 1 and 31536000"),
    sessionIdleTimeoutSeconds: parseVar(env, "SESSION_IDLE_TIMEOUT_SECONDS", intIn(1, 31536000, 86400), "a whole number of seconds between 1 and 31536000"),
    sessionMaxAgeSeconds: parseVar(env, "SESSION_MAX_AGE_SECONDS", intIn(1, 31536000, 2592000), "a whole number of seconds between 1 and 31536000"),
    upstreamTimeoutSeconds: parseVar(env, "UPSTREAM_TIMEOUT_SECONDS", intIn(1, 120, 5), "a whole number of seconds between 1 and 120"),
    refreshGraceSeconds: parseVar(env, "REFRESH_GRACE_SECONDS", intIn(0, 3600, 30), "a whole number of seconds between 0 and 3600"),
    auditRetentionDays: parseVar(env, "AUDIT_RETENTION_DAYS", intIn(1, 36500, 90), "a whole number of days between 1 and 36500"),
    deadGrantRetentionDays: parseVar(env, "DEAD_GRANT_RETENTION_DAYS", intIn(0, 36500, 7), "a whole number of days between 0 and 36500"),
  };
}
