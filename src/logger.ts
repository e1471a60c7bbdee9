// pino logger with redaction: tokens, authorization codes, secrets and cookies never reach the log.
// JSON lines for log collectors, or readable lines (pino-pretty) for a person at a terminal.
import pino from "pino";
import pretty from "pino-pretty";
import { mergeTraceFields, traceFields } from "./telemetry/span.ts";

export type Logger = pino.Logger;

const SENSITIVE_KEYS = [
  "authorization",
  "cookie",
  "set-cookie",
  "token",
  "access_token",
  "refresh_token",
  "id_token",
  "authorization_code",
  "code_verifier",
  "client_secret",
  "secret",
  "password",
  "x-upstream-access-token",
];

export type LogFormat = "pretty" | "json";

/** LOG_FORMAT, or by default: readable on a terminal, JSON when the output goes to a file or collector. */
export function logFormatFor(configured: LogFormat | undefined, stream: { isTTY?: boolean } = process.stdout): LogFormat {
  return configured ?? (stream.isTTY ? "pretty" : "json");
}

/** Readable lines on stdout, written at once (nothing lost when the process exits). */
export function prettyDestination(colorize = Boolean(process.stdout.isTTY)): pino.DestinationStream {
  return pretty({ colorize, sync: true, translateTime: "SYS:yyyy-mm-dd HH:MM:ss.l", ignore: "pid,hostname,service" });
}

const SENSITIVE = new Set(SENSITIVE_KEYS);
const CENSORED = "[redacted]";

/**
 * `code` names an authorization code in OAuth (a token request's form, a callback's query) and an
 * error's code everywhere else (ECONNREFUSED, HPE_INVALID_CHUNK_SIZE, invalid_grant, aborted): what
 * an operator needs to read. A `code` field is shown when its value has an error code's shape,
 * hidden otherwise. (Query strings are redacted by redactUrl below; request bodies are never logged.)
 */
const ERROR_CODE = /^(?:[A-Z][A-Z0-9_]*|[a-z]+(?:_[a-z]+)*)$/;

function hidden(key: string, value: unknown): boolean {
  const name = key.toLowerCase();
  if (name === "code") return !(typeof value === "number" || (typeof value === "string" && ERROR_CODE.test(value)));
  return SENSITIVE.has(name);
}

/**
 * `value` with every sensitive key's value replaced, on the object itself and two levels below it
 * (`headers.authorization`, `req.headers.cookie`), compared without case. Copies only what it
 * changes: the caller's objects are never modified, and a line with nothing to hide costs a scan.
 *
 * Not pino's `redact` option: its wildcard paths cost ~120 µs per line (measured with pino 10,
 * about ten times the line itself), and every /mcp request writes one.
 */
export function censorSensitive<T>(value: T, depth = 2): T {
  if (value === null || typeof value !== "object") return value;
  const source = value as Record<string, unknown>;
  let copy: Record<string, unknown> | undefined;
  for (const key of Object.keys(source)) {
    const original = source[key];
    const shown = hidden(key, original) ? CENSORED : depth > 0 ? censorSensitive(original, depth - 1) : original;
    if (shown === original) continue;
    copy ??= (Array.isArray(source) ? [...source] : { ...source }) as Record<string, unknown>;
    copy[key] = shown;
  }
  return (copy ?? value) as T;
}

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: "mcp-auth-broker" },
      // trace_id and span_id of the active span when tracing is on, so a log line leads to its trace.
      mixin: traceFields,
      mixinMergeStrategy: mergeTraceFields,
      // Child bindings are not censored: the broker's are request ids, commands and pids.
      formatters: {
        // An Error under `err` is left to its serializer below, which keeps its type, message and stack.
        log: (object) => {
          if (!("err" in object)) return censorSensitive(object);
          const { err, ...rest } = object;
          return { ...censorSensitive(rest), err };
        },
      },
      serializers: { err: (err: unknown) => censorSensitive(pino.stdSerializers.err(err as Error), 1) },
    },
    destination,
  );
}

/**
 * Query parameters whose values are shown in the request log: the ones that say what a request
 * was about and carry nothing a reader of the log could use. Every other value is hidden, whatever
 * its name: a token sent in a parameter nobody expected (`?transaction=`) is still a token. Not
 * here on purpose: `state` and `nonce` (CSRF and replay protection), `code`, `code_challenge`,
 * `error_description` (free text that may echo input), `login_hint` (an e-mail address).
 */
const LOGGED_PARAMS = new Set([
  "response_type",
  "response_mode",
  "grant_type",
  "code_challenge_method",
  "client_id",
  "redirect_uri",
  "scope",
  "resource",
  "prompt",
  "token_type_hint",
  "error",
  "iss",
]);

/** What an unexpected parameter may be called in the log; other names (a bare `?<token>`) are hidden too. */
const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_.-]{0,31}$/;

/** Credentials of known shape, hidden even in a logged value or in the path. */
const SECRET_SHAPES = /(?:mab_(?:at|rt|ac)_|gh[oprsu]_|github_pat_)[A-Za-z0-9_-]+|eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;

const REDACTED = "[redacted]";

function decodeComponent(text: string): string {
  try {
    return decodeURIComponent(text.replace(/\+/g, " "));
  } catch {
    return text;
  }
}

/** A logged value: a URL loses its credentials, query and fragment; known token shapes go. */
function loggedValue(value: string): string {
  let shown = value;
  if (/^[A-Za-z][A-Za-z0-9+.-]*:/.test(value)) {
    try {
      const url = new URL(value);
      if (url.username || url.password || url.search || url.hash) {
        url.username = "";
        url.password = "";
        url.search = "";
        url.hash = "";
        shown = `${url.href}${REDACTED}`;
      }
    } catch {
      shown = REDACTED;
    }
  }
  return shown.replace(SECRET_SHAPES, REDACTED);
}

/**
 * The request URL for logs: the query's values are replaced by `[redacted]` except for a short
 * list of harmless parameters (the same rule on every path: OAuth endpoints under PUBLIC_URL's
 * path or not, /mcp, anything else), names that do not look like parameter names are hidden
 * too, credentials in an absolute-form URL are dropped, and tokens of known shape are hidden in
 * the path.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf("?");
  const path = (q < 0 ? url : url.slice(0, q)).replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/?#]*@/, "$1").replace(SECRET_SHAPES, REDACTED);
  if (q < 0) return path;
  const shown: string[] = [];
  for (const pair of url.slice(q + 1).split("&")) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    const name = decodeComponent(eq < 0 ? pair : pair.slice(0, eq));
    if (eq >= 0 && LOGGED_PARAMS.has(name)) {
      const value = decodeComponent(pair.slice(eq + 1));
      const logged = loggedValue(value);
      // As the client sent it, unless something had to go.
      shown.push(logged === value ? pair : `${name}=${encodeURIComponent(logged).replaceAll(encodeURIComponent(REDACTED), REDACTED)}`);
    } else {
      shown.push(`${eq >= 0 && PLAIN_NAME.test(name) ? name : REDACTED}=${REDACTED}`);
    }
  }
  return `${path}?${shown.join("&")}`;
}
