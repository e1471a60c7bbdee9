// What the operator watches the broker with: the /metrics listener and its token, the log's level and format.
import { z } from "zod";
import { parseVar } from "./parse-var.ts";
import type { Env } from "./values.ts";

export function parseMetrics(env: Env) {
  const metricsPort = parseVar(env, "METRICS_PORT", z.coerce.number().int().min(0).max(65535).optional(), "a port number between 0 and 65535");
  const metricsToken = parseVar(
    env,
    "METRICS_TOKEN",
    z.string().min(16).optional(),
    "at least 16 characters, e.g. node -e \"console.log(require('crypto').randomBytes(24).toString('base64url'))\"",
  );
  return { metricsPort, metricsToken };
}

export function parseLogging(env: Env) {
  const logLevel =
    parseVar(
      env,
      "LOG_LEVEL",
      z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).optional(),
      "one of fatal, error, warn, info, debug, trace, silent",
    ) ?? "info";
  const logFormat = parseVar(env, "LOG_FORMAT", z.enum(["pretty", "json"]).optional(), "pretty or json");
  return { logLevel, logFormat };
}
