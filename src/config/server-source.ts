// Which MCP servers are fronted: the configuration file's (BROKER_CONFIG), or the one server the
// environment names (MCP_SERVER_URL, MCP_SERVER_COMMAND, or the built-in demo's) at /mcp.
import { z } from "zod";
import { defaultServer, type Catalogue, type McpBackend, type McpServerEntry } from "./catalogue.ts";
import { loadCatalogueFile, replacedVariable, type CatalogueFileContext } from "./file.ts";
import { bool, httpUrl, parseVar } from "./parse-var.ts";
import { parseStdioLimits, parseStdioServer, STDIO_LIMIT_VARIABLES, type StdioLimits, type StdioServerConfig } from "./stdio-server.ts";
import { ConfigError, type Env, type UpstreamKind } from "./values.ts";

/** What the environment says about the servers, read before the rest so a misplaced variable is named first. */
export interface ServerSource {
  readonly configFile: string | undefined;
  readonly environmentForwardsToken: boolean;
  readonly environmentUrl: string | undefined;
  readonly environmentStdio: StdioServerConfig | undefined;
  /** MCP_STDIO_* beside a file: the limits of the file's stdio servers. */
  readonly stdioLimits: StdioLimits | undefined;
}

export function parseServerSource(env: Env, cwd: string): ServerSource {
  // The catalogue's file, when there is one, replaces the variables of the environment's one server.
  const configFile = parseVar(env, "BROKER_CONFIG", z.string().optional(), "the path of the YAML configuration file, e.g. ./broker.yaml");
  const environmentForwardsToken = parseVar(env, "FORWARD_UPSTREAM_TOKEN", bool(false), "true or false");
  const replaced = configFile === undefined ? undefined : replacedVariable(env, configFile, environmentForwardsToken);
  if (replaced) throw replaced;
  const environmentUrl = parseVar(
    env,
    "MCP_SERVER_URL",
    httpUrl.optional(),
    "the absolute http(s) URL of the MCP server to protect, e.g. http://127.0.0.1:8080/mcp",
  );
  // Without a file, the stdio variables are checked with MCP_SERVER_COMMAND; beside one, MCP_STDIO_*
  // are the limits of the file's stdio servers.
  const environmentStdio = configFile === undefined ? parseStdioServer(env, cwd) : undefined;
  const stdioLimits = configFile === undefined ? undefined : parseStdioLimits(env);
  return { configFile, environmentForwardsToken, environmentUrl, environmentStdio, stdioLimits };
}

/** The catalogue of one the environment describes: the server of MCP_SERVER_URL / MCP_SERVER_COMMAND (or the demo's) at /mcp. */
function environmentCatalogue(input: {
  readonly resourceUrl: string;
  readonly resourceName: string;
  readonly mcpServerUrl: string | undefined;
  readonly stdioServer: StdioServerConfig | undefined;
  readonly forwardUpstreamToken: boolean;
  readonly scopes: McpServerEntry["scopes"];
}): Catalogue {
  const backend: McpBackend = input.mcpServerUrl
    ? { kind: "http", url: input.mcpServerUrl }
    : input.stdioServer
      ? { kind: "stdio", server: input.stdioServer }
      : { kind: "demo" };
  const entry: McpServerEntry = {
    name: "mcp",
    title: input.resourceName,
    description: undefined,
    path: "/mcp",
    resourceUrl: input.resourceUrl,
    isDefault: true,
    backend,
    forwardUpstreamToken: input.forwardUpstreamToken,
    scopes: input.scopes,
    access: undefined,
    tools: [],
  };
  return Object.freeze({ servers: Object.freeze([Object.freeze(entry)]), source: { kind: "environment" } as const });
}

/** The file's catalogue; MCP_STDIO_* beside a file without a stdio server would be ignored, so they are refused. */
function fileCatalogue(env: Env, context: CatalogueFileContext): Catalogue {
  const catalogue = loadCatalogueFile(context);
  const unused = STDIO_LIMIT_VARIABLES.find((name) => env[name]?.trim());
  if (unused && !catalogue.servers.some((s) => s.backend.kind === "stdio"))
    throw new ConfigError(unused, `only applies to stdio MCP servers, and ${context.file} lists none (a server with command): remove it`);
  return catalogue;
}

/** What the catalogue depends on besides its source. */
export interface CatalogueInputs {
  readonly cwd: string;
  readonly publicUrl: string;
  /** PUBLIC_URL's host: the one server's name when RESOURCE_NAME is not set. */
  readonly publicHost: string;
  readonly provider: UpstreamKind;
  readonly scopes: McpServerEntry["scopes"];
}

/** The catalogue, and its entry at /mcp (or its first) that the fields of one server describe. */
export function catalogueOf(env: Env, source: ServerSource, inputs: CatalogueInputs): { readonly catalogue: Catalogue; readonly main: McpServerEntry } {
  const { publicUrl } = inputs;
  const environmentResourceName =
    parseVar(env, "RESOURCE_NAME", z.string().trim().min(1).max(80).optional(), "a short name of 1 to 80 characters, e.g. Acme Docs") ?? inputs.publicHost;
  const catalogue =
    source.configFile !== undefined && source.stdioLimits !== undefined
      ? fileCatalogue(env, { file: source.configFile, cwd: inputs.cwd, env, publicUrl, provider: inputs.provider, stdioLimits: source.stdioLimits })
      : environmentCatalogue({
          resourceUrl: `${publicUrl}/mcp`,
          resourceName: environmentResourceName,
          mcpServerUrl: source.environmentUrl,
          stdioServer: source.environmentStdio,
          forwardUpstreamToken: source.environmentForwardsToken,
          scopes: inputs.scopes,
        });
  return { catalogue, main: defaultServer(catalogue) ?? catalogue.servers[0]! };
}

/**
 * The fields of one server mean the entry at /mcp (or the first): what the code written for one
 * server reads until it reads the catalogue.
 */
export function oneServerFields(main: McpServerEntry) {
  return {
    resourceUrl: main.resourceUrl,
    mcpServerUrl: main.backend.kind === "http" ? main.backend.url : undefined,
    stdioServer: main.backend.kind === "stdio" ? main.backend.server : undefined,
    resourceName: main.title,
    forwardUpstreamToken: main.forwardUpstreamToken,
  };
}
