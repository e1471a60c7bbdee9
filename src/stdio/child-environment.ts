// The environment a stdio MCP server starts with. Built from an allow-list, never from the broker's
// whole environment: the broker's SECRET_KEY, DATABASE_URL and client secret must not reach a
// program that runs on behalf of a user.
import { isInheritedVariable } from "../config/stdio-server.ts";

/**
 * The child's environment: the allow-listed part of `parent`, then the operator's fixed variables,
 * then the user's tokens under their variables (last, so nothing can replace them).
 */
export function childEnvironment(
  parent: NodeJS.ProcessEnv,
  fixed: Readonly<Record<string, string>>,
  tokens: readonly { readonly variable: string; readonly value: string }[],
): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(parent)) {
    if (value !== undefined && isInheritedVariable(name)) env[name] = value;
  }
  Object.assign(env, fixed);
  for (const token of tokens) env[token.variable] = token.value;
  return env;
}
