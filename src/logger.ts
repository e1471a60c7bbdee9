// pino logger with redaction: tokens, codes, secrets and cookies never reach the log.
import pino from "pino";

export type Logger = pino.Logger;

const SENSITIVE_KEYS = [
  "authorization",
  "cookie",
  "set-cookie",
  "token",
  "access_token",
  "refresh_token",
  "id_token",
  "code",
  "code_verifier",
  "client_secret",
  "secret",
  "password",
  "x-upstream-access-token",
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "mcp-auth-broker" },
      redact: {
        paths: [
          ...SENSITIVE_KEYS.map((k) => `*["${k}"]`),
          ...SENSITIVE_KEYS.map((k) => `*.*["${k}"]`),
          ...SENSITIVE_KEYS.map((k) => `["${k}"]`),
        ],
        censor: "[redacted]",
      },
    },
    destination,
  );
}

const SENSITIVE_PARAMS = new Set([
  "code",
  "token",
  "access_token",
  "refresh_token",
  "id_token",
  "client_secret",
  "code_verifier",
  "state",
  "csrf",
  "password",
]);

/** The request URL for logs: values of sensitive query parameters are replaced. */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of new Set(params.keys())) {
    if (SENSITIVE_PARAMS.has(key.toLowerCase())) params.set(key, "[redacted]");
  }
  return `${url.slice(0, q)}?${params.toString()}`;
}
