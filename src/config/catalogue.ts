// The MCP servers one broker fronts: each its own protected resource (RFC 8707, RFC 9728) at
// PUBLIC_URL/mcp/<name>, with its own backend, scopes, access rules and tool rules. The environment
// alone (MCP_SERVER_URL or MCP_SERVER_COMMAND, or neither in demo mode) gives a catalogue of one, at
// /mcp; a configuration file (BROKER_CONFIG) gives as many as it lists.
import type { StdioServerConfig } from "./stdio-server.ts";
import type { ScopeImplications } from "./client-interop.ts";
import type { ConnectionConfig, ServerConnection } from "./connections.ts";

/** A server's name: in its URL path and its metric labels, so URL-safe and short. */
export const SERVER_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** Who may use a server or call a tool: rules of the global policy's kinds (any one admits). */
export interface AccessRules {
  /** Logins, subjects (`github:1`, `client:id`) or e-mail patterns, with `*` globs. */
  readonly users: readonly string[];
  /** Verified e-mail domains, lower-case. */
  readonly emailDomains: readonly string[];
  /** `org` or `org/team` (GitHub logins only). */
  readonly githubOrgs: readonly { readonly org: string; readonly team?: string | undefined }[];
  /** Groups from the OIDC groups claim. */
  readonly groups: readonly string[];
}

/**
 * One rule of a server's tool list, tried in order: the first whose `match` glob names the tool
 * decides. No rule matches: the tool may be called (the server's access rules already admitted
 * the user).
 */
export type ToolRule =
  | { readonly match: string; readonly deny: true }
  | {
      readonly match: string;
      readonly deny?: false;
      /** Only these users may call it (undefined: whoever may use the server). */
      readonly allow?: AccessRules | undefined;
      /** The token must carry this scope; without it the client is asked to step up (403 insufficient_scope). */
      readonly requireScope?: string | undefined;
    };

export type McpBackend =
  | { readonly kind: "http"; readonly url: string }
  | { readonly kind: "stdio"; readonly server: StdioServerConfig }
  /** The built-in demo MCP server (demo mode without MCP_SERVER_URL / MCP_SERVER_COMMAND). */
  | { readonly kind: "demo" };

export interface McpServerEntry {
  /** URL-safe name (SERVER_NAME): the path /mcp/<name>, metric labels, `--server` filters. */
  readonly name: string;
  /** How pages (consent, front page, /account) and the resource metadata name it. */
  readonly title: string;
  readonly description: string | undefined;
  /** Its path below PUBLIC_URL: /mcp/<name>, or /mcp for a catalogue of one or the default entry. */
  readonly path: string;
  /** PUBLIC_URL + path: the canonical resource URI its tokens are bound to. */
  readonly resourceUrl: string;
  /** Also answers at /mcp (the only entry of a catalogue of one, or the one marked `default`). */
  readonly isDefault: boolean;
  readonly backend: McpBackend;
  /** Pass the user's upstream access token on (HTTP: X-Upstream-Access-Token; stdio: tokenEnv). */
  readonly forwardUpstreamToken: boolean;
  /** Scopes this server understands, their consent-page descriptions and implications. */
  readonly scopes: {
    readonly supported: readonly string[];
    readonly descriptions: Readonly<Record<string, string>>;
    readonly implies: ScopeImplications;
  };
  /** Narrows (never widens) the global access policy; undefined: the global policy alone. */
  readonly access: AccessRules | undefined;
  readonly tools: readonly ToolRule[];
  /** The connected account whose token (the user's own) reaches this server; undefined: none. */
  readonly connection?: ServerConnection | undefined;
  /** Clients (the server itself, registered by the operator) that may exchange its assertions for the connection's token (RFC 8693). */
  readonly exchangeClients?: readonly string[] | undefined;
}

export interface Catalogue {
  /** In the order written; names unique; at most one isDefault. */
  readonly servers: readonly McpServerEntry[];
  /** The services users connect accounts at (the file's `connections`); none from the environment. */
  readonly connections?: readonly ConnectionConfig[] | undefined;
  /** Where the catalogue came from: the environment, or the file's absolute path. */
  readonly source: { readonly kind: "environment" } | { readonly kind: "file"; readonly path: string };
}

/** The entry that answers at /mcp, if any. */
export function defaultServer(catalogue: Catalogue): McpServerEntry | undefined {
  return catalogue.servers.find((s) => s.isDefault);
}

/** The entry whose resource URI is `resource` (canonical form), if any. */
export function serverByResource(catalogue: Catalogue, resource: string): McpServerEntry | undefined {
  return catalogue.servers.find((s) => s.resourceUrl === resource);
}

/** The configured connection `name`, if any. */
export function connectionByName(catalogue: Catalogue, name: string): ConnectionConfig | undefined {
  return catalogue.connections?.find((c) => c.name === name);
}

/** Whether the user's upstream access token reaches this server (a header, or the stdio child's tokenEnv). */
export function passesUpstreamToken(server: McpServerEntry): boolean {
  return server.forwardUpstreamToken || (server.backend.kind === "stdio" && server.backend.server.tokenEnv !== undefined);
}

/**
 * The catalogue a running broker serves: read through it at every use (never copied), so that a
 * reload (SIGHUP, `mcp-auth-broker reload`) that replaces it reaches every reader at once.
 */
export class LiveCatalogue implements Catalogue {
  private current: Catalogue;
  /** Counts replacements: what pages rendered from the catalogue are cached by. */
  version = 0;

  constructor(initial: Catalogue) {
    this.current = initial;
  }

  get servers(): readonly McpServerEntry[] {
    return this.current.servers;
  }

  get connections(): readonly ConnectionConfig[] | undefined {
    return this.current.connections;
  }

  get source(): Catalogue["source"] {
    return this.current.source;
  }

  replace(next: Catalogue): void {
    this.current = next;
    this.version++;
  }
}
