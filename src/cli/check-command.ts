// `check`: what an operator runs after editing .env, before (or instead of) reading logs. Each
// line says what was checked and, when it failed, what to change. Exit 1 when anything failed.
import type { Command } from "commander";
import { callbackUrl, configProblems, missingMcpServer, readEnvironment, type Config } from "../config.ts";
import { describeUnknownVariable, unknownVariables } from "../config-sources.ts";
import type { Database } from "../store/db.ts";
import { UpstreamError } from "../upstream/provider.ts";
import { cliConfig } from "./context.ts";
import { AccessPolicy } from "../grants/policy.ts";
import { CliError, jsonCommand, printJson } from "./output.ts";
import type { CliIo } from "./io.ts";
import type { CheckResult } from "./mcp-server-check.ts";

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
    const { describeDatabaseFailure } = await import("../store/database-failure.ts");
    return { check: "database", ok: false, detail: `cannot use ${where}: ${await describeDatabaseFailure(config.databaseUrl, err)}` };
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

/** Prints the results; fails the command (exit 1) when any failed. */
function report(io: CliIo, opts: { json?: boolean }, results: readonly CheckResult[]): void {
  if (opts.json) printJson(io, results);
  else for (const r of results) io.out(`${r.ok ? "ok  " : "FAIL"}  ${r.check.padEnd(17)}  ${r.detail}\n`);
  if (results.some((r) => !r.ok)) throw new CliError(`${results.filter((r) => !r.ok).length} check(s) failed`);
}

export function registerCheckCommand(program: Command, io: CliIo): void {
  jsonCommand(program, "check", "check the configuration, the database, the identity provider credentials and the MCP server").action(
    async (opts: { json?: boolean }) => {
      const env = readEnvironment(io.cwd, io.env);
      const unknown = unknownVariables(env).map((v) => ({ check: "configuration", ok: false, detail: `${describeUnknownVariable(v)}: rename or remove it` }));
      // A configuration that does not load: every problem in it, and nothing else can be checked.
      const problems = configProblems(env, io.cwd);
      if (problems.length) return report(io, opts, [...problems.map((p) => ({ check: "configuration", ok: false, detail: p.message })), ...unknown]);
      const config = cliConfig(io);
      const noMcpServer = missingMcpServer(config);
      const results: CheckResult[] = [
        ...unknown,
        ...(noMcpServer ? [{ check: "configuration", ok: false, detail: noMcpServer.message }] : []),
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
        ...(await Promise.all([
          checkDatabase(config, io.cwd),
          checkUpstream(config),
          import("./mcp-server-check.ts").then(({ checkMcpServer }) => checkMcpServer(config, program.version() ?? "unknown")),
        ])),
      ];
      report(io, opts, results);
    },
  );
}
