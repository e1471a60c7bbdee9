// Fronting a stdio MCP server (MCP_SERVER_COMMAND and its companions), as the operator wrote it in
// the environment or in the configuration file's servers: parsed once at start, one line per
// mistake. src/stdio/ runs it.
import { existsSync, statSync } from "node:fs";
import path from "node:path";
import { ConfigError, ENV_NAME, type Env } from "./values.ts";

export interface StdioServerConfig {
  /** The program, as the first word of MCP_SERVER_COMMAND (looked up on PATH when not a path). */
  readonly command: string;
  readonly args: readonly string[];
  /** MCP_SERVER_CWD, absolute; undefined: the broker's working directory. */
  readonly cwd: string | undefined;
  /** MCP_SERVER_ENV: fixed variables every child gets. */
  readonly env: Readonly<Record<string, string>>;
  /** MCP_SERVER_TOKEN_ENV: the variable that receives the user's upstream access token. */
  readonly tokenEnv: string | undefined;
  /** MCP_STDIO_MAX_PROCESSES: children running at once, all users together. */
  readonly maxProcesses: number;
  /** Children one user may run at once (a quarter of the global limit, at least one). */
  readonly maxProcessesPerUser: number;
  /** MCP_STDIO_IDLE_SECONDS: a child without a request for this long is stopped (its session ends). */
  readonly idleSeconds: number;
  /** MCP_STDIO_REQUEST_TIMEOUT_SECONDS: a request the child has not answered by then gets an error. */
  readonly requestTimeoutSeconds: number;
}

const DEFAULT_MAX_PROCESSES = 32;
const DEFAULT_IDLE_SECONDS = 900;
/**
 * The HTTP backend's PROXY_TIMEOUT_SECONDS default, so that a silent server costs the same wait
 * behind either backend: long enough for slow tools and for a person answering an elicitation,
 * short enough that a hung child does not hold a request (and the client's slot) forever.
 */
const DEFAULT_REQUEST_TIMEOUT_SECONDS = 300;

/**
 * Splits a command line into words as a POSIX shell would quote them (single quotes, double quotes,
 * backslashes) without being a shell: no variables, globs, pipes or redirections. Those characters
 * unquoted are refused rather than passed as arguments the operator did not mean.
 */
export function shellWords(line: string, variable: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
      continue;
    }
    inWord = true;
    if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) throw new ConfigError(variable, "expected a closing single quote");
      word += line.slice(i + 1, end);
      i = end;
    } else if (c === '"') {
      let j = i + 1;
      for (; j < line.length && line[j] !== '"'; j++) {
        if (line[j] === "\\" && j + 1 < line.length && '"\\$`'.includes(line[j + 1]!)) j++;
        word += line[j];
      }
      if (j >= line.length) throw new ConfigError(variable, "expected a closing double quote");
      i = j;
    } else if (c === "\\") {
      if (i + 1 < line.length) word += line[++i];
    } else if ("|&;<>$`(){}*?".includes(c)) {
      throw new ConfigError(
        variable,
        `the command is run without a shell, so ${JSON.stringify(c)} would not do what a shell does; quote it if it is meant literally, or put the pipeline in a script and run that`,
      );
    } else word += c;
  }
  if (inWord) words.push(word);
  return words;
}

function positiveInt(env: Env, name: string, fallback: number, max: number): number {
  const raw = env[name]?.trim();
  if (!raw) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < 1 || Number(raw) > max) {
    throw new ConfigError(name, `expected a whole number between 1 and ${max}, got ${JSON.stringify(raw.slice(0, 60))}`);
  }
  return Number(raw);
}

/** The variables that mean something only beside MCP_SERVER_COMMAND. */
export const STDIO_COMPANION_VARIABLES = [
  "MCP_SERVER_CWD",
  "MCP_SERVER_ENV",
  "MCP_SERVER_TOKEN_ENV",
  "MCP_STDIO_MAX_PROCESSES",
  "MCP_STDIO_IDLE_SECONDS",
  "MCP_STDIO_REQUEST_TIMEOUT_SECONDS",
] as const;

/** The limits on children (MCP_STDIO_*): one broker's, whichever stdio servers it runs. */
export const STDIO_LIMIT_VARIABLES = ["MCP_STDIO_MAX_PROCESSES", "MCP_STDIO_IDLE_SECONDS", "MCP_STDIO_REQUEST_TIMEOUT_SECONDS"] as const;

export type StdioLimits = Pick<StdioServerConfig, "maxProcesses" | "maxProcessesPerUser" | "idleSeconds" | "requestTimeoutSeconds">;

export function parseStdioLimits(env: Env): StdioLimits {
  const maxProcesses = positiveInt(env, "MCP_STDIO_MAX_PROCESSES", DEFAULT_MAX_PROCESSES, 10_000);
  return {
    maxProcesses,
    maxProcessesPerUser: Math.max(1, Math.floor(maxProcesses / 4)),
    idleSeconds: positiveInt(env, "MCP_STDIO_IDLE_SECONDS", DEFAULT_IDLE_SECONDS, 7 * 24 * 3600),
    requestTimeoutSeconds: positiveInt(env, "MCP_STDIO_REQUEST_TIMEOUT_SECONDS", DEFAULT_REQUEST_TIMEOUT_SECONDS, 24 * 3600),
  };
}

/** The parts of a stdio server the operator writes. */
export type StdioField = "command" | "cwd" | "env" | "tokenEnv";

/** A stdio server as written: in the environment (lines of words) or in the configuration file (lists and mappings). */
export interface StdioServerValues {
  /** A command line, split like a shell would split it (shellWords), or its words. */
  readonly command: string | readonly string[];
  readonly cwd: string | undefined;
  /** `NAME=value` words, or a mapping. */
  readonly env: string | Readonly<Record<string, string>> | undefined;
  readonly tokenEnv: string | undefined;
}

/**
 * A mistake in one field; `key` narrows it to one word of the command or one variable of `env`
 * when the field was written as a list or a mapping.
 */
export type StdioReport = (field: StdioField, message: string, key?: string | number) => void;

type FieldNames = { readonly [F in StdioField]: string };

/** What the checks of one stdio server share: every mistake reported, and whether there was one. */
class StdioChecks {
  failed = false;

  constructor(
    readonly names: FieldNames,
    private readonly report: StdioReport,
  ) {}

  fail(field: StdioField, message: string, key?: string | number): void {
    this.failed = true;
    this.report(field, message, key);
  }

  words(line: string, field: StdioField): string[] {
    try {
      return shellWords(line, this.names[field]);
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      this.fail(field, err.detail);
      return [];
    }
  }

  variableName(name: string, field: StdioField, key?: string): boolean {
    if (ENV_NAME.test(name)) return true;
    this.fail(field, `expected an environment variable name (letters, digits, _), got ${JSON.stringify(name.slice(0, 60))}`, key);
    return false;
  }
}

/** The variable that receives each user's upstream token: one of the server's own, not one it inherits. */
function tokenEnvOf(values: StdioServerValues, c: StdioChecks): string | undefined {
  const tokenEnvRaw = values.tokenEnv?.trim();
  if (!tokenEnvRaw || !c.variableName(tokenEnvRaw, "tokenEnv")) return undefined;
  if (isInheritedVariable(tokenEnvRaw)) {
    c.fail("tokenEnv", `expected a variable of the server's own (e.g. GITHUB_PERSONAL_ACCESS_TOKEN), not ${tokenEnvRaw}`);
    return undefined;
  }
  return tokenEnvRaw;
}

/** The variables fixed for the server: `NAME=value` words or a mapping; never the token's. */
function fixedEnvOf(values: StdioServerValues, tokenEnv: string | undefined, c: StdioChecks): Record<string, string> {
  const fixed: Record<string, string> = {};
  const fix = (name: string, value: string, key?: string) => {
    if (!c.variableName(name, "env", key)) return;
    if (name === tokenEnv) c.fail("env", `${name} receives each user's upstream token (${c.names.tokenEnv}): it cannot also be fixed`, key);
    else fixed[name] = value;
  };
  if (typeof values.env === "string") {
    for (const word of c.words(values.env, "env")) {
      const eq = word.indexOf("=");
      if (eq <= 0) c.fail("env", `expected NAME=value words separated by spaces, got ${JSON.stringify(word.slice(0, 60))}`);
      else fix(word.slice(0, eq), word.slice(eq + 1));
    }
  } else for (const [name, value] of Object.entries(values.env ?? {})) fix(name, value, name);
  return fixed;
}

/**
 * The checks a stdio server passes wherever it is written. `names` say how messages name the
 * fields (the variables, or the file's keys); every mistake is reported, and undefined returned
 * when there was one.
 */
export function stdioServerFrom(
  values: StdioServerValues,
  limits: StdioLimits,
  cwd: string,
  names: FieldNames,
  report: StdioReport,
): StdioServerConfig | undefined {
  const c = new StdioChecks(names, report);
  const [command, ...args] = typeof values.command === "string" ? c.words(values.command, "command") : values.command;
  // (A line that could not be split is reported already.)
  if (!command && !c.failed) c.fail("command", "expected a command, e.g. npx -y @modelcontextprotocol/server-github");

  const cwdRaw = values.cwd?.trim();
  const serverCwd = cwdRaw ? path.resolve(cwd, cwdRaw) : undefined;
  if (serverCwd !== undefined && !(existsSync(serverCwd) && statSync(serverCwd).isDirectory()))
    c.fail("cwd", `expected an existing folder, ${serverCwd} is not one`);

  const tokenEnv = tokenEnvOf(values, c);
  const fixed = fixedEnvOf(values, tokenEnv, c);

  if (c.failed || !command) return undefined;
  return Object.freeze({
    command,
    args: Object.freeze([...args]),
    cwd: serverCwd,
    env: Object.freeze(fixed),
    tokenEnv,
    ...limits,
  });
}

/** The environment's names for a stdio server's fields. */
const ENVIRONMENT_NAMES = { command: "MCP_SERVER_COMMAND", cwd: "MCP_SERVER_CWD", env: "MCP_SERVER_ENV", tokenEnv: "MCP_SERVER_TOKEN_ENV" } as const;

/** The stdio server to front, or undefined when MCP_SERVER_COMMAND is not set. */
export function parseStdioServer(env: Env, cwd: string): StdioServerConfig | undefined {
  const line = env.MCP_SERVER_COMMAND?.trim();
  const companions = STDIO_COMPANION_VARIABLES;
  if (!line) {
    const orphan = companions.find((name) => env[name]?.trim());
    if (orphan) throw new ConfigError(orphan, "only applies to a stdio MCP server: set MCP_SERVER_COMMAND too, or remove it");
    return undefined;
  }
  if (env.MCP_SERVER_URL?.trim()) {
    throw new ConfigError("MCP_SERVER_COMMAND", "expected either MCP_SERVER_URL (an HTTP MCP server) or MCP_SERVER_COMMAND (a stdio one), both are set");
  }
  const values: StdioServerValues = { command: line, cwd: env.MCP_SERVER_CWD, env: env.MCP_SERVER_ENV, tokenEnv: env.MCP_SERVER_TOKEN_ENV };
  // The environment reports its first mistake, as every variable does.
  return stdioServerFrom(values, parseStdioLimits(env), cwd, ENVIRONMENT_NAMES, (field, message) => {
    throw new ConfigError(ENVIRONMENT_NAMES[field], message);
  });
}

/** What a program needs to run at all (find programs, a home, a locale, temp files, a proxy, CAs). */
export const INHERITED_VARIABLES: readonly string[] = [
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TMPDIR",
  "TEMP",
  "TMP",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "NODE_EXTRA_CA_CERTS",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
];

/** Inherited too: the locale categories (LC_ALL, LC_CTYPE…). */
export function isInheritedVariable(name: string): boolean {
  return INHERITED_VARIABLES.includes(name) || /^LC_[A-Z_]+$/.test(name);
}
