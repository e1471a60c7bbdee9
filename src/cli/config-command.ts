// The configuration file from the command line: `--config FILE` (serve, check) stands for
// BROKER_CONFIG, and `config schema` prints the file's JSON Schema for editors.
import type { Command } from "commander";
import { catalogueJsonSchema } from "../config/catalogue-schema.ts";
import type { CliIo } from "./io.ts";
import { cliConfig } from "./context.ts";
import { CliError } from "./output.ts";
import { isNodeProcess, PID_FILE, readPid } from "../pid-file.ts";

/** Adds `--config FILE` to a command. */
export function configOption(command: Command): Command {
  return command.option("--config <file>", "the YAML configuration file (BROKER_CONFIG), relative to the working directory");
}

/** `io` with BROKER_CONFIG set to `--config`'s file: the option wins over the environment and .env, as a command line does. */
export function withConfigFile<T extends Pick<CliIo, "env">>(io: T, file: string | undefined): T {
  return file === undefined ? io : { ...io, env: { ...io.env, BROKER_CONFIG: file } };
}

export function registerConfigCommands(program: Command, io: CliIo): void {
  const config = program.command("config").description("the configuration file (BROKER_CONFIG)");
  config
    .command("schema")
    .description("print the configuration file's JSON Schema (for editors: see the README's \"Several MCP servers\")")
    .action(() => io.out(`${JSON.stringify(catalogueJsonSchema(), null, 2)}\n`));
}

/**
 * `reload`: the file is checked here first (its mistakes printed, nothing signalled), then the
 * running broker of this data folder is sent SIGHUP through its pid file; its log says what it did.
 */
export function registerReloadCommand(program: Command, io: CliIo): void {
  configOption(program.command("reload"))
    .description("make the running broker read its configuration file again (SIGHUP): servers added, changed, removed")
    .action((opts: { config?: string }) => {
      const config = cliConfig(withConfigFile(io, opts.config));
      if (config.catalogue.source.kind !== "file")
        throw new CliError("there is no configuration file to reload: set BROKER_CONFIG (or --config) as the running broker has it");
      const pid = readPid(config.dataDir);
      if (pid === undefined || !isNodeProcess(pid))
        throw new CliError(
          `no running broker found (no live pid in ${config.dataDir}/${PID_FILE}): start one with \`mcp-auth-broker serve\`, or send SIGHUP to it yourself`,
        );
      try {
        process.kill(pid, "SIGHUP");
      } catch (err) {
        throw new CliError(
          `could not signal the broker (pid ${pid}): ${(err as NodeJS.ErrnoException).code ?? "error"}; run this as the user the broker runs as`,
        );
      }
      io.out(`asked the broker (pid ${pid}) to reload ${config.catalogue.source.path}; its log says what changed\n`);
    });
}
