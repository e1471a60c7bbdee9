// `check`: what an operator runs after editing .env, before (or instead of) reading logs. Each
// line says what was checked and, when it failed, what to change. Exit 1 when anything failed.
import type { Command } from "commander";
import { callbackUrl, type Config } from "../config.ts";
import type { Database } from "../store/db.ts";
import { UpstreamError } from "../upstream/provider.ts";
import { cliConfig } from "./context.ts";
import { AccessPolicy } from "../grants/policy.ts";
import { CliError, jsonCommand, printJson } from "./output.ts";
import type { CliIo } from "./io.ts";

interface CheckResult {
  readonly check: string;
  readonly ok: boolean;
  readonly detail: string;
}

async function checkDatabase(config: Config, cwd: string): Promise<CheckResult> {
  const where = config.databaseKind === "postgres" ? "PostgreSQL" : `SQLite (${config.databaseUrl})`;
  let database: Database | undefined;
  try {
    const [{ openDatabase }, { pendingMigrations }] = await Promise.all([import("../store/db.ts"), import("../store/migrate.ts")]);
    database = await openDatabase(config.databaseUrl, cwd);
    const pending = await pendingMigrations(database);
    if (pending.length)
      return {
        check: "database",
        ok: false,
        detail: `${where} is reachable but ${pending.length} migration(s) are pending (${pending.join(", ")}): run npx mcp-auth-broker migrate (npm start does it too)`,
      };
    return { check: "database", ok: true, detail: `${where} is reachable and up to date` };
  } catch (err) {
    return {
      check: "database",
      ok: false,
      detail: `cannot use ${where}: ${(err as Error).message.split("\n")[0]} (check DATABASE_URL and that the server is running)`,
    };
  } finally {
    await database?.close();
  }
}

async function checkUpstream(config: Config): Promise<CheckResult> {
  if (config.demoMode)
    return {
      check: "identity provider",
      ok: true,
      detail: "demo mode: the built-in demo identity provider starts with the broker (anyone can sign in as anyone)",
    };
  const { createUpstreamProvider } = await import("../upstream/create.ts");
  const provider = createUpstreamProvider(config.upstream, { policy: config.accessPolicy });
  try {
    await provider.prepare?.();
    await provider.verifyCredentials(callbackUrl(config.publicUrl));
    return { check: "identity provider", ok: true, detail: `${provider.displayName} accepts UPSTREAM_CLIENT_ID and UPSTREAM_CLIENT_SECRET` };
  } catch (err) {
    const message = err instanceof UpstreamError ? err.message : String(err);
    return { check: "identity provider", ok: false, detail: `${provider.displayName}: ${message}` };
  }
}

async function checkMcpServer(config: Config): Promise<CheckResult> {
  if (!config.mcpServerUrl) return { check: "MCP server", ok: true, detail: "MCP_SERVER_URL is not set: the built-in demo MCP server is used" };
  try {
    // Any HTTP answer proves the address is right; what the MCP server says to a bare request does not matter.
    const res = await fetch(config.mcpServerUrl, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: "{}",
      signal: AbortSignal.timeout(config.proxyTimeoutMs),
    });
    await res.body?.cancel();
    return { check: "MCP server", ok: true, detail: `${config.mcpServerUrl} answers (HTTP ${res.status})` };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    const reason = cause?.code ?? cause?.message ?? (err as Error).message;
    return { check: "MCP server", ok: false, detail: `cannot reach ${config.mcpServerUrl} (${reason}): start the MCP server or correct MCP_SERVER_URL` };
  }
}

export function registerCheckCommand(program: Command, io: CliIo): void {
  jsonCommand(program, "check", "check the configuration, the database, the identity provider credentials and the MCP server").action(
    async (opts: { json?: boolean }) => {
      const config = cliConfig(io);
      const results: CheckResult[] = [
        {
          check: "configuration",
          ok: true,
          detail: `PUBLIC_URL ${config.publicUrl}, ${config.demoMode ? "demo mode" : `${config.upstream.provider} login`}, ${config.databaseKind}`,
        },
        {
          check: "who may sign in",
          ok: true,
          detail: new AccessPolicy(config.accessPolicy).describe().join("; "),
        },
        ...(await Promise.all([checkDatabase(config, io.cwd), checkUpstream(config), checkMcpServer(config)])),
      ];
      if (opts.json) printJson(io, results);
      else for (const r of results) io.out(`${r.ok ? "ok  " : "FAIL"}  ${r.check.padEnd(17)}  ${r.detail}\n`);
      if (results.some((r) => !r.ok)) throw new CliError(`${results.filter((r) => !r.ok).length} check(s) failed`);
    },
  );
}
