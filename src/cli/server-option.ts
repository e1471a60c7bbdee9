// `--server NAME` of the commands that list what concerns MCP servers (grants, audit): one server of
// the catalogue, by the name its configuration gives it; an unknown name is a usage error that
// lists the names there are.
import type { Command } from "commander";
import type { Config } from "../config/load.ts";
import { CliError } from "./output.ts";

export function serverOption(command: Command): Command {
  return command.option("--server <name>", "only what concerns this MCP server of the catalogue (its name in the configuration file; mcp without one)");
}

export function serverNamed(config: Config, name: string | undefined): { readonly name: string; readonly resource: string } | undefined {
  if (name === undefined) return undefined;
  const server = config.catalogue.servers.find((s) => s.name === name);
  if (!server)
    throw new CliError(
      `--server ${JSON.stringify(name)}: no such MCP server; the configuration has ${config.catalogue.servers.map((s) => s.name).join(", ")}`,
      2,
    );
  return { name: server.name, resource: server.resourceUrl };
}
