// The configuration file (BROKER_CONFIG): YAML read with the position of every node kept, `${NAME}`
// references filled from the environment, checked by the one schema (catalogue-schema.ts) and then
// by the rules that depend on the environment (the identity provider, folders). Every mistake is
// reported at once, each as `file:line:column: key.path: what is wrong`, so that an operator fixes
// them in one round and an editor or terminal can jump to each.
import { readFileSync } from "node:fs";
import path from "node:path";
import leven from "leven";
import { isMap, isNode, isPair, isScalar, isSeq, LineCounter, parseDocument, visit, type Document } from "yaml";
import type { z } from "zod";
import { parseAccessRules, type AccessRuleKind, type AccessRuleWording } from "./access-policy.ts";
import type { AccessRules, Catalogue, McpBackend, McpServerEntry, ToolRule } from "./catalogue.ts";
import { AT_KEY, CatalogueFileSchema, KNOWN_KEYS, ServerSchema, type ServerInput } from "./catalogue-schema.ts";
import { connectionsOf, serverConnection } from "./connection-entries.ts";
import { closeImplications, DEFAULT_DESCRIPTIONS } from "./client-interop.ts";
import { stdioServerFrom, type StdioField, type StdioLimits } from "./stdio-server.ts";
import { ConfigError, ENV_NAME, type Env, type UpstreamKind } from "./values.ts";

type KeyPath = readonly (string | number)[];

/** One mistake in the file, where it is: `broker.yaml:12:7: servers[1].url: expected …`. */
export class ConfigFileProblem extends ConfigError {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly column: number,
    readonly keyPath: string,
    problem: string,
  ) {
    super("BROKER_CONFIG", problem);
    this.name = "ConfigFileProblem";
    this.message = `${file}:${line}:${column}: ${keyPath ? `${keyPath}: ` : ""}${problem}`;
  }
}

/** Every mistake of the file; the start-up refuses with all of them, `check` lists each. */
export class ConfigFileError extends ConfigError {
  constructor(
    readonly file: string,
    readonly problems: readonly ConfigFileProblem[],
  ) {
    super(
      "BROKER_CONFIG",
      `${file} has ${problems.length === 1 ? "a mistake" : `${problems.length} mistakes`}:\n${problems.map((p) => `  ${p.message}`).join("\n")}`,
    );
    this.name = "ConfigFileError";
  }
}

/** What the file's servers depend on besides the file. */
export interface CatalogueFileContext {
  /** BROKER_CONFIG as written: relative to cwd, and how messages name the file. */
  readonly file: string;
  readonly cwd: string;
  /** Where `${NAME}` is read from (the environment with .env and the *_FILE secrets). */
  readonly env: Env;
  /** PUBLIC_URL, canonical: each server's resource is PUBLIC_URL/mcp/<name>. */
  readonly publicUrl: string;
  readonly provider: UpstreamKind;
  /** MCP_STDIO_*: the limits every stdio server of the file runs under. */
  readonly stdioLimits: StdioLimits;
}

/** How messages about a server's `access` or a tool's `allow` name the lists. */
const FILE_WORDING: AccessRuleWording = {
  names: { users: "users", emailDomains: "emailDomains", githubOrgs: "githubOrgs", groups: "groups" },
  everyone: "leave the list out to let in whoever the global policy admits",
};

const STDIO_NAMES = { command: "command", cwd: "cwd", env: "env", tokenEnv: "tokenEnv" } as const satisfies Record<StdioField, string>;

/** `servers[1].scopes.docs:read`: what the operator searches the file for. */
export function formatKeyPath(keyPath: KeyPath): string {
  return keyPath
    .map((key, i) => (typeof key === "number" ? `[${key}]` : /^[^\s.[\]"]+$/.test(key) ? `${i === 0 ? "" : "."}${key}` : `[${JSON.stringify(key)}]`))
    .join("");
}

/** The file's problems as they are found, then turned into positions. */
class Problems {
  private readonly found: ConfigFileProblem[] = [];
  constructor(
    private readonly file: string,
    private readonly doc: Document,
    private readonly lines: LineCounter,
  ) {}

  get count(): number {
    return this.found.length;
  }

  /** At a character offset of the file. */
  atOffset(offset: number, keyPath: KeyPath, message: string): void {
    const { line, col } = this.lines.linePos(offset);
    this.found.push(new ConfigFileProblem(this.file, line, col, formatKeyPath(keyPath), message));
  }

  /** At the value at `keyPath`, or at the nearest enclosing one that is written (a missing key: its object). */
  at(keyPath: KeyPath, message: string): void {
    for (let n = keyPath.length; n >= 0; n--) {
      const node = n === 0 ? this.doc.contents : this.doc.getIn(keyPath.slice(0, n), true);
      if (isNode(node) && node.range) {
        this.atOffset(node.range[0], keyPath, message);
        return;
      }
    }
    this.atOffset(0, keyPath, message);
  }

  /** At the key `key` of the mapping at `mapPath` (an unknown key, a bad name). */
  atKey(mapPath: KeyPath, key: string, message: string): void {
    const map = mapPath.length === 0 ? this.doc.contents : this.doc.getIn(mapPath, true);
    const pair = isMap(map) ? map.items.find((p) => isScalar(p.key) && String(p.key.value) === key) : undefined;
    if (isScalar(pair?.key) && pair.key.range) this.atOffset(pair.key.range[0], [...mapPath, key], message);
    else this.at([...mapPath, key], message);
  }

  /** In the order of the file. */
  sorted(): ConfigFileProblem[] {
    return [...this.found].sort((a, b) => a.line - b.line || a.column - b.column);
  }
}

/**
 * `${NAME}` replaced by the variable's value; `$${` is a literal `${`. A variable not set (or
 * empty, as everywhere in the broker's configuration) is a mistake: a secret left out must not
 * become an empty string silently.
 */
function substitute(text: string, env: Env, report: (message: string) => void): string {
  return text.replace(/\$\$\{|\$\{([^}]*)(\})?/g, (whole, name: string | undefined, closed: string | undefined) => {
    if (whole === "$${") return "${";
    if (closed === undefined || name === undefined || !ENV_NAME.test(name)) {
      report(`expected \${NAME} with a variable name (letters, digits, _), got ${JSON.stringify(whole.slice(0, 60))}; write $\${ for a literal \${`);
      return whole;
    }
    const value = env[name];
    if (value === undefined || value === "") {
      report(`refers to the environment variable ${name}, which is not set: set it (in the environment or .env), or write $\${ for a literal \${`);
      return whole;
    }
    return value;
  });
}

/** The key path of a node from the ancestors `visit` passes (Document, maps, pairs, lists). */
function keyPathOf(ancestors: readonly unknown[], node: unknown): KeyPath {
  const keyPath: (string | number)[] = [];
  for (const [i, ancestor] of ancestors.entries()) {
    const child = ancestors[i + 1] ?? node;
    if (isPair(ancestor) && isScalar(ancestor.key)) keyPath.push(String(ancestor.key.value));
    else if (isSeq(ancestor)) keyPath.push(ancestor.items.indexOf(child as never));
  }
  return keyPath;
}

/** Each string value (never a key) with its references filled in, where it stands in the document. */
function substituteReferences(doc: Document, env: Env, problems: Problems): void {
  visit(doc, {
    Scalar(key, node, ancestors) {
      if (key === "key" || typeof node.value !== "string" || !node.value.includes("${")) return;
      node.value = substitute(node.value, env, (message) => problems.atOffset(node.range?.[0] ?? 0, keyPathOf(ancestors, node), message));
    },
  });
}

/** The keys known where an unknown one was written, for "did you mean". */
function knownKeysAt(objectPath: KeyPath): readonly string[] {
  const last = objectPath.at(-1);
  const parent = objectPath.at(-2);
  if (objectPath.length === 0) return KNOWN_KEYS.file;
  if (last === "access" || last === "allow") return KNOWN_KEYS.access;
  if (typeof last === "number" && parent === "tools") return KNOWN_KEYS.tool;
  if (typeof last === "number" && parent === "servers") return KNOWN_KEYS.server;
  return [];
}

function unknownKeyMessage(key: string, known: readonly string[]): string {
  const nearest = known.map((k) => ({ k, d: leven(key.toLowerCase(), k.toLowerCase()) })).sort((a, b) => a.d - b.d)[0];
  const hint = nearest && nearest.d <= Math.max(2, Math.floor(key.length / 3)) ? ` (did you mean ${nearest.k}?)` : "";
  return `${key} is not a setting here${hint}; known: ${known.join(", ")}`;
}

/** The value at `keyPath` of plain data, for wording a type mistake. */
function valueAt(data: unknown, keyPath: KeyPath): unknown {
  let value = data;
  for (const key of keyPath) {
    if (typeof value !== "object" || value === null) return undefined;
    value = (value as Record<string | number, unknown>)[key];
  }
  return value;
}

const typeName = (value: unknown) =>
  value === null ? "nothing (null)" : Array.isArray(value) ? "a list" : typeof value === "object" ? "a mapping" : `${typeof value} ${JSON.stringify(value)}`;

function reportIssue(issue: z.core.$ZodIssue, data: unknown, problems: Problems): void {
  const keyPath = issue.path.filter((k): k is string | number => typeof k !== "symbol");
  switch (issue.code) {
    case "unrecognized_keys":
      for (const key of issue.keys) problems.atKey(keyPath, key, unknownKeyMessage(key, knownKeysAt(keyPath)));
      return;
    case "invalid_key": {
      const key = keyPath.at(-1);
      const message = issue.issues[0]?.message ?? issue.message;
      if (typeof key === "string") problems.atKey(keyPath.slice(0, -1), key, message);
      else problems.at(keyPath, message);
      return;
    }
    case "invalid_type": {
      const value = valueAt(data, keyPath);
      if (keyPath.length === 0 && (value === undefined || value === null)) problems.at(keyPath, "the file is empty: it lists the servers under servers:");
      else if (value === undefined) problems.at(keyPath, "required");
      else {
        const expected = issue.expected === "object" ? "a mapping" : issue.expected === "array" ? "a list" : `a ${issue.expected}`;
        problems.at(keyPath, `expected ${expected}, got ${typeName(value)}`);
      }
      return;
    }
    default: {
      const message = issue.message.replace(/^Invalid input: /, "");
      const key = keyPath.at(-1);
      if (issue.code === "custom" && issue.params?.at === AT_KEY.at && typeof key === "string") problems.atKey(keyPath.slice(0, -1), key, message);
      else problems.at(keyPath, message);
    }
  }
}

/** A server's `access` or a tool's `allow`, by the rules of the global policy (access-policy.ts). */
function accessRules(written: ServerInput["access"], at: KeyPath, provider: UpstreamKind, problems: Problems): AccessRules | undefined {
  if (written === undefined) return undefined;
  const lists = { users: written.users ?? [], emailDomains: written.emailDomains ?? [], githubOrgs: written.githubOrgs ?? [], groups: written.groups ?? [] };
  return Object.freeze(
    parseAccessRules(lists, provider, FILE_WORDING, (kind: AccessRuleKind, index, message) =>
      problems.at(index === undefined ? [...at, kind] : [...at, kind, index], message),
    ),
  );
}

function toolRules(tools: ServerInput["tools"], at: KeyPath, provider: UpstreamKind, problems: Problems): ToolRule[] {
  return (tools ?? []).map((rule, i): ToolRule => {
    if (rule.deny === true) return Object.freeze({ match: rule.match, deny: true });
    return Object.freeze({
      match: rule.match,
      allow: accessRules(rule.allow, [...at, "tools", i, "allow"], provider, problems),
      requireScope: rule.requireScope,
    });
  });
}

/** What of a server depends on the environment (identity provider, folders): checked, mistakes reported. */
function environmentParts(server: Partial<ServerInput>, at: KeyPath, context: CatalogueFileContext, problems: Problems) {
  let backend: McpBackend | undefined;
  if (server.url !== undefined) backend = { kind: "http", url: server.url.replace(/\/+$/, "") };
  else if (server.command !== undefined) {
    const env = server.env === undefined ? undefined : Object.fromEntries(Object.entries(server.env).map(([name, value]) => [name, String(value)]));
    const stdio = stdioServerFrom(
      { command: server.command, cwd: server.cwd, env, tokenEnv: server.tokenEnv },
      context.stdioLimits,
      context.cwd,
      STDIO_NAMES,
      (field, message, key) => {
        if (field === "env" && typeof key === "string") problems.atKey([...at, "env"], key, message);
        else problems.at([...at, field], message);
      },
    );
    if (stdio) backend = { kind: "stdio", server: stdio };
  }
  const access = accessRules(server.access, [...at, "access"], context.provider, problems);
  const tools = toolRules(server.tools, at, context.provider, problems);
  return { backend, access, tools };
}

/** One server of the file as a catalogue entry; undefined when something in it is wrong (reported). */
function catalogueEntry(server: ServerInput, index: number, isDefault: boolean, context: CatalogueFileContext, problems: Problems): McpServerEntry | undefined {
  const before = problems.count;
  const { backend, access, tools } = environmentParts(server, ["servers", index], context, problems);
  if (!backend || problems.count > before) return undefined;

  const declared = Object.keys(server.scopes ?? {});
  const entryPath = `/mcp/${server.name}`;
  return Object.freeze({
    name: server.name,
    title: server.title ?? server.name,
    description: server.description,
    path: entryPath,
    resourceUrl: `${context.publicUrl}${entryPath}`,
    isDefault,
    backend,
    forwardUpstreamToken: server.forwardUpstreamToken ?? false,
    scopes: Object.freeze({
      supported: Object.freeze(declared.length ? declared : ["mcp"]),
      descriptions: Object.freeze({ ...DEFAULT_DESCRIPTIONS, ...server.scopes }),
      implies: closeImplications(server.scopeImplies ?? {}),
    }),
    access,
    tools: Object.freeze(tools),
    connection: serverConnection(server),
    exchangeClients: Object.freeze([...(server.exchangeClients ?? [])]),
  });
}

/**
 * The keys of a server that has mistakes which are well formed on their own (each parsed by its
 * own schema), without the keys the mistakes are in.
 */
function wellFormedKeys(raw: unknown, error: z.ZodError): Partial<ServerInput> {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return {};
  const faulty = new Set<string>();
  for (const issue of error.issues) {
    const key = issue.path[0];
    if (typeof key === "string") faulty.add(key);
  }
  const shape: Readonly<Record<string, z.ZodType>> = ServerSchema.shape;
  const parts: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    const parsed = !faulty.has(key) && Object.hasOwn(shape, key) ? shape[key]!.safeParse(value) : undefined;
    if (parsed?.success) parts[key] = parsed.data;
  }
  return parts as Partial<ServerInput>;
}

/**
 * The variables that describe the one server of an environment-only configuration: beside a file,
 * each would be ignored or contradict it, so each is refused with the key that replaces it.
 */
const REPLACED_BY_THE_FILE: Readonly<Record<string, string>> = {
  MCP_SERVER_URL: "url",
  MCP_SERVER_COMMAND: "command",
  MCP_SERVER_CWD: "cwd",
  MCP_SERVER_ENV: "env",
  MCP_SERVER_TOKEN_ENV: "tokenEnv",
  RESOURCE_NAME: "title",
};

/**
 * The first variable set beside BROKER_CONFIG that the file's servers replace, as a ConfigError
 * naming it. FORWARD_UPSTREAM_TOKEN counts only when true (its false is the default .env.example writes).
 */
export function replacedVariable(env: Env, file: string, forwardsUpstreamToken: boolean): ConfigError | undefined {
  const name = forwardsUpstreamToken ? "FORWARD_UPSTREAM_TOKEN" : Object.keys(REPLACED_BY_THE_FILE).find((variable) => env[variable]?.trim());
  if (name === undefined) return undefined;
  const key = REPLACED_BY_THE_FILE[name] ?? "forwardUpstreamToken";
  const what =
    name === "MCP_SERVER_URL" || name === "MCP_SERVER_COMMAND"
      ? `either the file's servers (BROKER_CONFIG=${file}) or ${name}, not both`
      : `is replaced by ${file}`;
  return new ConfigError(name, `${what}: write it as ${key} of a server in the file, and remove ${name}`);
}

function readFile(file: string, cwd: string): string {
  const absolute = path.resolve(cwd, file);
  try {
    return readFileSync(absolute, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "unreadable";
    throw new ConfigError("BROKER_CONFIG", `cannot read ${absolute} (${code}): correct the path (it is relative to ${cwd}), or make the file readable`);
  }
}

/**
 * The catalogue the file describes. Throws ConfigFileError with every mistake (YAML syntax first:
 * a file that is not valid YAML is not looked at further), or ConfigError when it cannot be read.
 */
export function loadCatalogueFile(context: CatalogueFileContext): Catalogue {
  const text = readFile(context.file, context.cwd);
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const problems = new Problems(context.file, doc, lines);
  if (doc.errors.length) {
    for (const err of doc.errors) problems.atOffset(err.pos[0], [], err.message);
    throw new ConfigFileError(context.file, problems.sorted());
  }
  substituteReferences(doc, context.env, problems);
  const data: unknown = doc.toJS();
  const parsed = CatalogueFileSchema.safeParse(data);
  if (!parsed.success) for (const issue of parsed.error.issues) reportIssue(issue, data, problems);

  // Each server is checked further against the environment, so that one round shows everything.
  const written = valueAt(data, ["servers"]);
  const servers = (Array.isArray(written) ? written : []).map((raw) => ServerSchema.safeParse(raw));
  const defaults = servers.filter((s) => s.success && s.data.default === true).length;
  const entries = servers.map((s, i) => {
    if (!s.success) {
      // Its mistakes are reported; what is well formed around them is checked all the same (there
      // is no entry to make: the file is refused).
      environmentParts(wellFormedKeys(valueAt(data, ["servers", i]), s.error), ["servers", i], context, problems);
      return undefined;
    }
    // A catalogue of one answers at /mcp unless it says otherwise.
    const isDefault = s.data.default ?? (servers.length === 1 && defaults === 0);
    return catalogueEntry(s.data, i, isDefault, context, problems);
  });
  if (problems.count || !parsed.success) throw new ConfigFileError(context.file, problems.sorted());
  return Object.freeze({
    servers: Object.freeze(entries.filter((e): e is McpServerEntry => e !== undefined)),
    connections: connectionsOf(parsed.data.connections),
    source: Object.freeze({ kind: "file" as const, path: path.resolve(context.cwd, context.file) }),
  });
}
