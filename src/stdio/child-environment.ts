// The environment a stdio MCP server starts with. Built from an allow-list, never from the broker's
// whole environment: the broker's SECRET_KEY, DATABASE_URL and client secret must not reach a
// program that runs on behalf of a user.

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

/**
 * The child's environment: the allow-listed part of `parent`, then the operator's fixed variables,
 * then the user's token under its variable (last, so nothing can replace it).
 */
export function childEnvironment(
  parent: NodeJS.ProcessEnv,
  fixed: Readonly<Record<string, string>>,
  token: { readonly variable: string; readonly value: string } | undefined,
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && isInheritedVariable(name)) env[name] = value;
  }
  Object.assign(env, fixed);
  if (token) env[token.variable] = token.value;
  return env;
}
