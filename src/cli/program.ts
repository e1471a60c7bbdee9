// The operator CLI as a function of its arguments and its I/O: the binary (main.ts) runs it on
// the process; tests run it in-process. Exit codes: 0 done, 1 failed (message on stderr), 2 usage.
import { Command, CommanderError } from "commander";
import { registerGrantCommands } from "./grants-commands.ts";
import { registerMaintenanceCommands } from "./maintenance-commands.ts";
import { registerClientCommands } from "./clients-commands.ts";
import { registerCheckCommand } from "./check-command.ts";
import { registerAuditCommand } from "./audit-command.ts";
import { configOption, registerConfigCommands, registerReloadCommand, withConfigFile } from "./config-command.ts";
import { CliError } from "./output.ts";
import type { CliIo } from "./io.ts";
import { MigrationError } from "../store/migration-error.ts";
import { packageVersion as version } from "../package-version.ts";
import { DatabaseNotWritableError } from "../store/writability.ts";

/** Runs one command line (the arguments after the program name); resolves to the exit code. */
export async function runCli(args: readonly string[], io: CliIo): Promise<number> {
  const program = new Command()
    .name("mcp-auth-broker")
    .description("Operator commands for mcp-auth-broker (reads the same .env / environment as the server)")
    .version(version)
    .showHelpAfterError("(run with --help for usage)")
    .configureOutput({ writeOut: io.out, writeErr: io.err })
    .exitOverride();
  registerClientCommands(program, io);
  registerGrantCommands(program, io);
  registerMaintenanceCommands(program, io);
  registerCheckCommand(program, io);
  registerAuditCommand(program, io);
  registerConfigCommands(program, io);
  registerReloadCommand(program, io);
  let exitCode = 0;
  configOption(program.command("serve"))
    .description("start the server (what npm start runs): migrate, then serve until SIGTERM or SIGINT")
    .action(async (opts: { config?: string }) => {
      // Loaded only here: the other commands start faster without the whole server.
      const { serve } = await import("../serve.ts");
      exitCode = await serve(withConfigFile(io, opts.config));
    });
  try {
    await program.parseAsync([...args], { from: "user" });
    return exitCode;
  } catch (err) {
    if (err instanceof CommanderError) {
      // Help and version asked for are not errors. Usage errors were already printed by commander;
      // "commander.help" is the help it prints for a command given without its subcommand.
      return ["commander.helpDisplayed", "commander.version"].includes(err.code) ? 0 : 2;
    }
    if (err instanceof CliError) {
      io.err(`mcp-auth-broker: ${err.message}\n`);
      return err.exitCode;
    }
    // Says what is wrong and what to do, like a CliError.
    if (err instanceof DatabaseNotWritableError || err instanceof MigrationError) {
      io.err(`mcp-auth-broker: ${err.message}\n`);
      return 1;
    }
    io.err(`mcp-auth-broker: unexpected error: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}\n`);
    return 1;
  }
}
