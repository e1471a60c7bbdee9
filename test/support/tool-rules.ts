// What the tests of tool rules check the same way whichever backend serves the server: a refused
// call as the SDK client meets it, the refusal metric, the audit trail, and the SDK's step-up for a
// scope a tool requires.
import { expect } from "@jest/globals";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import type { TestBroker } from "./start-broker.ts";
import type { CallbackServer, ConnectedClient } from "./mcp-oauth-client.ts";

/** Calls `tool` and expects the broker's refusal: -32602 naming the tool, nothing of the rule (`rule` must not show). */
export async function expectToolRefused(client: ConnectedClient, tool: string, args: Record<string, unknown>, rule: RegExp): Promise<void> {
  let refused: unknown;
  try {
    await client.client.callTool({ name: tool, arguments: args });
  } catch (err) {
    refused = err;
  }
  expect(refused).toBeInstanceOf(McpError);
  expect((refused as McpError).code).toBe(-32602);
  expect((refused as McpError).message).toContain(`"${tool}" is not permitted for you`);
  expect((refused as McpError).message).not.toMatch(rule);
}

/** The broker's count of tool calls refused by tool rules (its /metrics, read with `metricsToken`). */
export async function toolDeniedRefusals(t: TestBroker, metricsToken: string): Promise<number> {
  const text = await (await fetch(`${t.url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text();
  return Number(/^mab_refusals_total\{reason="tool_denied"\} (\d+)$/m.exec(text)?.[1]);
}

/** The details of the `tool.denied` audit events so far, oldest first. */
export async function toolDeniedEvents(t: TestBroker): Promise<Record<string, unknown>[]> {
  const events = await t.broker.database.db.auditEvent.findMany({ where: { type: "tool.denied" }, orderBy: { at: "asc" } });
  return events.map((e) => JSON.parse(e.detail) as Record<string, unknown>);
}

/**
 * Calls `tool`, which needs `scope`: expects the SDK to start its step-up (403 insufficient_scope
 * naming the scope), runs `meanwhile` (what must hold before the user consents), completes the
 * authorization and expects the new token to carry the scope.
 */
export async function stepUpFor(
  c: ConnectedClient,
  callback: CallbackServer,
  tool: string,
  args: Record<string, unknown>,
  scope: string,
  meanwhile: () => Promise<void> = async () => {},
): Promise<void> {
  let stepUp: unknown;
  try {
    await c.client.callTool({ name: tool, arguments: args });
  } catch (err) {
    stepUp = err;
  }
  if (!(stepUp instanceof UnauthorizedError)) throw stepUp;
  expect(c.provider.authorizationUrls.at(-1)!.searchParams.get("scope")?.split(" ")).toContain(scope);
  await meanwhile();
  const outcome = await callback.next();
  expect(outcome.code).toBeDefined();
  await c.transport.finishAuth(outcome.code!);
  expect((c.provider.savedTokens!.scope ?? "").split(" ")).toContain(scope);
}
