// `migrate` and `purge`: database upkeep an operator runs by hand or from cron.
import type { Command } from "commander";
import { cliConfig, withContext } from "./context.ts";
import { jsonCommand, printFields, printJson } from "./output.ts";
import type { CliIo } from "./io.ts";

export function registerMaintenanceCommands(program: Command, io: CliIo): void {
  jsonCommand(program, "migrate", "apply pending database migrations (npm start does this too)").action(async (opts: { json?: boolean }) => {
    const config = cliConfig(io);
    const { migrateDatabase } = await import("../store/migrate.ts");
    const { applied } = await migrateDatabase(config.databaseUrl, io.cwd);
    if (opts.json) return printJson(io, { applied });
    io.out(applied.length ? `Applied ${applied.length} migration(s): ${applied.join(", ")}\n` : "Database is up to date.\n");
  });

  jsonCommand(program, "purge", "remove expired codes, transactions, tokens and long-dead grants now (the periodic sweep, on demand)").action(
    async (opts: { json?: boolean }) => {
      await withContext(io, async ({ services }) => {
        const result = await services.grants.sweep();
        if (opts.json) return printJson(io, result);
        printFields(io, Object.fromEntries(Object.entries(result).map(([k, v]) => [k, String(v)])));
      });
    },
  );
}
