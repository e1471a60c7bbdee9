// Server catalogues the environment cannot describe (access rules, several servers), built onto a
// loaded configuration: startBroker's `configure` takes these.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import type { Config } from "../../src/config/load.ts";
import type { AccessRules, Catalogue, McpServerEntry } from "../../src/config/catalogue.ts";

/** Access rules with the kinds not named left empty. */
export function accessRules(rules: Partial<AccessRules>): AccessRules {
  return { users: [], emailDomains: [], githubOrgs: [], groups: [], ...rules };
}

/**
 * The catalogue `build` makes from the environment's one server (at PUBLIC_URL/mcp); `source`
 * "file" stands for a catalogue read from a configuration file.
 */
export function withCatalogue(build: (environmentServer: McpServerEntry) => McpServerEntry[], source: "environment" | "file" = "environment") {
  return (config: Config): Config => {
    const only = config.catalogue.servers[0]!;
    const catalogue: Catalogue = {
      servers: build(only),
      source: source === "file" ? { kind: "file", path: "/etc/mcp-auth-broker/broker.yaml" } : { kind: "environment" },
    };
    return { ...config, catalogue };
  };
}

/** The environment's one server with these access rules. */
export function withServerAccess(rules: Partial<AccessRules>) {
  return withCatalogue((server) => [{ ...server, access: accessRules(rules) }]);
}

/** Another server beside the environment's, at PUBLIC_URL/mcp/<name>. */
export function otherServer(like: McpServerEntry, name: string, fields: Partial<McpServerEntry> = {}): McpServerEntry {
  const path = `/mcp/${name}`;
  return { ...like, name, title: name, path, resourceUrl: like.resourceUrl.replace(/\/mcp$/, path), isDefault: false, access: undefined, ...fields };
}

/** A configuration file written from `lines` in a folder of its own; `remove` deletes both. */
export function catalogueFile(lines: readonly string[]): { readonly file: string; remove(): void } {
  const dir = mkdtempSync(path.join(tmpdir(), "mab-catalogue-"));
  const file = path.join(dir, "broker.yaml");
  writeFileSync(file, `${lines.join("\n")}\n`);
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
