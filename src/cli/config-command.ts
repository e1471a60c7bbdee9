// The configuration file from the command line: `--config FILE` (serve, check) stands for
// BROKER_CONFIG, and `config schema` prints the file's JSON Schema for editors.
import type { Command } from "commander";
import { catalogueJsonSchema } from "../config/catalogue-schema.ts";
import type { CliIo } from "./io.ts";

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
