// `migrate` and `purge`: database upkeep an operator runs by hand or from cron.
import type { Command } from "commander";
import { cliConfig, withContext } from "./context.ts";
import { CliError, jsonCommand, printFields, printJson } from "./output.ts";
import { migrateDatabase, MigrationError } from "../store/migrate.ts";

export function registerMaintenanceCommands(program: Command): void {
  jsonCommand(program, "migrate", "apply pending database migrations (npm start does this too)")
    .action(async (opts: { json?: boolean }) => {
      const config = cliConfig();
      try {
        const { applied } = await migrateDatabase(config.databaseUrl);
        if (opts.json) return printJson({ applied });
        process.stdout.write(applied.length ? `Applied ${applied.length} migration(s): ${applied.join(", ")}\n` : "Database is up to date.\n");
      } catch (err) {
        if (err instanceof MigrationError) throw new CliError(err.message);
        throw err;
      }
    });

  jsonCommand(program, "purge", "remove expired codes, transactions, tokens and long-dead grants now (the periodic sweep, on demand)")
    .action(async (opts: { json?: boolean }) => {
      await withContext(async ({ services }) => {
        const result = await services.grants.sweep();
        if (opts.json) return printJson(result);
        printFields(Object.fromEntries(Object.entries(result).map(([k, v]) => [k, String(v)])));
      });
    });
}
