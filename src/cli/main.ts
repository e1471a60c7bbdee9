// `npx mcp-auth-broker <command>`: the operator CLI. Same configuration (.env, environment) as the
// server. Exit codes: 0 done, 1 failed (message on stderr), 2 usage error.
import { Command, CommanderError } from "commander";
import { registerGrantCommands } from "./grants-commands.ts";
import { registerMaintenanceCommands } from "./maintenance-commands.ts";
import { registerClientCommands } from "./clients-commands.ts";
import { registerCheckCommand } from "./check-command.ts";
import { CliError } from "./output.ts";

const program = new Command()
  .name("mcp-auth-broker")
  .description("Operator commands for mcp-auth-broker (reads the same .env / environment as the server)")
  .showHelpAfterError("(run with --help for usage)")
  .exitOverride();

registerClientCommands(program);
registerGrantCommands(program);
registerMaintenanceCommands(program);
registerCheckCommand(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) {
    // Help and version are not errors; usage errors were already printed by commander.
    process.exit(err.code === "commander.helpDisplayed" || err.code === "commander.help" || err.code === "commander.version" ? 0 : 2);
  }
  if (err instanceof CliError) {
    process.stderr.write(`mcp-auth-broker: ${err.message}\n`);
    process.exit(err.exitCode);
  }
  process.stderr.write(`mcp-auth-broker: unexpected error: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}\n`);
  process.exit(1);
}
