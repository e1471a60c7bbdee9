// `check`: what an operator runs after editing .env, before (or instead of) reading logs. The
// configuration is read once and every problem in it listed; then whatever the problems leave
// checkable is probed (listening address, database, identity provider, MCP server) with the code
// the broker itself probes with at start. Each line says what was checked and, when it failed,
// what to change. Exit 1 when anything failed: exit 0 means `npm start` would start and work.
import type { Command } from "commander";
import { existsSync } from "node:fs";
import path from "node:path";
import { dataFolderProblem, folderWriteFailure, inspectConfig, readEnvironment, type Config } from "../config/load.ts";
import { describeUnknownVariable, unknownVariables } from "../config/sources.ts";
import type { Database } from "../store/db.ts";
import { AccessPolicy } from "../grants/policy.ts";
import { POLICY_VARIABLES } from "../config/access-policy.ts";
import type { Finding } from "../diagnostics/finding.ts";
import { describeListenFailure, listenFailure } from "../diagnostics/listen-probe.ts";
import { CliError, jsonCommand, printJson } from "./output.ts";
import type { CliIo } from "./io.ts";
import { configOption, withConfigFile } from "./config-command.ts";

async function checkDatabase(config: Config, cwd: string): Promise<Finding> {
  const where = config.databaseKind === "postgres" ? "PostgreSQL" : `SQLite (${config.databaseUrl})`;
  let database: Database | undefined;
  try {
    const [{ openDatabase, sqliteFilePath }, { pendingMigrations }] = await Promise.all([import("../store/db.ts"), import("../store/migrate.ts")]);
    // check writes nothing: a SQLite file that is not there yet is not created, only its folder looked at.
    const file = config.databaseKind === "sqlite" ? sqliteFilePath(config.databaseUrl, cwd) : undefined;
    if (file !== undefined && !existsSync(file)) {
      const failure = folderWriteFailure(path.dirname(file));
      return failure
        ? {
            check: "database",
            ok: false,
            detail: `cannot create the SQLite file ${file} (${failure}): create its folder, writable by the user running the broker, or change DATABASE_URL`,
          }
        : { check: "database", ok: true, detail: `${where} does not exist yet: npm start will create it and apply the migrations` };
    }
    database = await openDatabase(config.databaseUrl, cwd);
    const pending = await pendingMigrations(database);
    // Not a failure: starting applies them (npm start and serve migrate before serving).
    if (pending.length)
      return {
        check: "database",
        ok: true,
        detail: `${where} is reachable; npm start will apply ${pending.length} pending migration(s) first (${pending.join(", ")})`,
      };
    return { check: "database", ok: true, detail: `${where} is reachable and up to date` };
  } catch (err) {
    const { describeDatabaseFailure } = await import("../store/database-failure.ts");
    return { check: "database", ok: false, detail: `cannot use ${where}: ${await describeDatabaseFailure(config.databaseUrl, err)}` };
  } finally {
    await database?.close();
  }
}

/** Is HOST:PORT free, or held by a broker that is running now (to be restarted with the change)? */
async function checkListening(config: Config): Promise<Finding> {
  const code = await listenFailure(config.host, config.port);
  const where = `${config.host}:${config.port}`;
  if (code === undefined) return { check: "listening", ok: true, detail: config.port === 0 ? `${config.host}, on any free port (PORT=0)` : `${where} is free` };
  if (code === "EADDRINUSE") {
    const health = await fetch(`http://${config.host.includes(":") ? `[${config.host}]` : config.host}:${config.port}/healthz`, {
      signal: AbortSignal.timeout(2000),
    }).then(
      async (res) => (res.ok ? ((await res.json()) as { status?: unknown }).status : undefined),
      () => undefined,
    );
    if (health === "ok") return { check: "listening", ok: true, detail: `a broker is running on ${where} now: restart it to apply changes` };
  }
  return { check: "listening", ok: false, detail: describeListenFailure(code, config.host, config.port) ?? `cannot listen on ${where} (${code})` };
}

/** The file's servers, each with where it answers: what an operator pastes into clients. */
function describeServers(config: Config): string {
  const servers = config.catalogue.servers.map(
    (s) => `${s.name} at ${s.resourceUrl}${s.isDefault ? ` (also ${config.publicUrl}/mcp)` : ""}${s.backend.kind === "stdio" ? " (stdio)" : ""}`,
  );
  return `${servers.length} from ${config.catalogue.source.kind === "file" ? config.catalogue.source.path : "the environment"}: ${servers.join(", ")}`;
}

/** Which variables a probe reads: one set aside or stood in for makes its answer meaningless. */
const touches = (unsettled: ReadonlySet<string>, pattern: RegExp) => [...unsettled].some((name) => pattern.test(name));

async function findings(io: CliIo, version: string): Promise<Finding[]> {
  const env = readEnvironment(io.cwd, io.env);
  const { problems, config, unsettled } = inspectConfig(env, io.cwd);
  const results: Finding[] = [
    ...problems.map((p) => ({ check: "configuration", ok: false, detail: p.message })),
    ...unknownVariables(env).map((v) => ({ check: "configuration", ok: false, detail: `${describeUnknownVariable(v)}: rename or remove it` })),
  ];
  // Nothing else can be read when the configuration does not load even with stand-ins.
  if (!config) return results;
  if (problems.length === 0)
    results.push({
      check: "configuration",
      ok: true,
      detail: `PUBLIC_URL ${config.publicUrl}${config.insecurePublicUrl ? " (plain http: INSECURE_PUBLIC_URL=true)" : ""}, ${config.demoMode ? "demo mode" : `${config.upstream.provider} login`}, ${config.databaseKind}`,
    });
  if (config.catalogue.source.kind === "file") results.push({ check: "MCP servers", ok: true, detail: describeServers(config) });
  if (!touches(unsettled, new RegExp(`^(${POLICY_VARIABLES.join("|")}|UPSTREAM_GROUPS_CLAIM)$`)))
    results.push({ check: "who may sign in", ok: true, detail: new AccessPolicy(config.accessPolicy).describe().join("; ") });
  // Demo mode without SECRET_KEY generates one at first start and keeps it in the data folder.
  const keepsKey = config.demoMode && !env.SECRET_KEY?.trim() && !env.SECRET_KEY_FILE?.trim() && !existsSync(path.join(config.dataDir, "secret.key"));
  const dataFolder = keepsKey ? dataFolderProblem(config.dataDir) : undefined;
  if (dataFolder) results.push({ check: "data folder", ok: false, detail: dataFolder });
  const probes = await Promise.all([
    touches(unsettled, /^(PORT|HOST)$/) ? undefined : checkListening(config),
    touches(unsettled, /^DATABASE_URL/) ? undefined : checkDatabase(config, io.cwd),
    touches(unsettled, /^(UPSTREAM_|GITHUB_)/) ? undefined : import("../diagnostics/upstream-probe.ts").then(({ checkUpstream }) => checkUpstream(config)),
    touches(unsettled, /^(MCP_SERVER_|PROXY_TIMEOUT_SECONDS|FORWARD_UPSTREAM_TOKEN|BROKER_CONFIG)/)
      ? undefined
      : import("../diagnostics/mcp-server-probe.ts").then(({ checkMcpServer }) => checkMcpServer(config, version)),
  ]);
  return [...results, ...probes.filter((f): f is Finding => f !== undefined)];
}

/** Prints the results; fails the command (exit 1) when any failed. */
function report(io: CliIo, opts: { json?: boolean }, results: readonly Finding[]): void {
  if (opts.json) printJson(io, results);
  else for (const r of results) io.out(`${r.ok ? "ok  " : "FAIL"}  ${r.check.padEnd(17)}  ${r.detail}\n`);
  if (results.some((r) => !r.ok)) throw new CliError(`${results.filter((r) => !r.ok).length} check(s) failed`);
}

export function registerCheckCommand(program: Command, io: CliIo): void {
  configOption(
    jsonCommand(program, "check", "check the whole configuration, the listening address, the database, the identity provider credentials and the MCP server"),
  ).action(async (opts: { json?: boolean; config?: string }) =>
    report(io, opts, await findings(withConfigFile(io, opts.config), program.version() ?? "unknown")),
  );
}
