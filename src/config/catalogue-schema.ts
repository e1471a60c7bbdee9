// The configuration file (BROKER_CONFIG) as one zod schema: its shape, and the rules that need
// nothing but the file (names, url or command, one default, the scopes rules name). What depends on
// the environment (the identity provider for access rules, folders, `${NAME}` references) is
// checked by file.ts. `mcp-auth-broker config schema` prints this schema as JSON Schema for editors.
import { z } from "zod";
import { SERVER_NAME } from "./catalogue.ts";
import { impliedScopeProblem, SCOPE_TOKEN } from "./client-interop.ts";
import { isPlainHttpUrl } from "./values.ts";

/** Keys a later version reads (connected accounts): refused as "not supported by this version", not as typos. */
export const LATER_KEYS: readonly string[] = ["connection", "connectionInject", "connections"];

/**
 * The longest tool name (MCP 2025-11-25, "Tool Names": 1 to 128 characters). A pattern whose
 * literal characters alone are longer would match no tool.
 */
export const TOOL_NAME_MAX_LENGTH = 128;

/**
 * Why a tool pattern cannot be meant as written (undefined: it can). `*` is the only wildcard, as
 * in the access policy's globs (grants/glob.ts matches them in linear time); tool names are
 * case-sensitive printable ASCII without spaces or commas (MCP "Tool Names"), so other glob
 * syntax would be taken literally and match nothing.
 */
export function toolPatternProblem(pattern: string): string | undefined {
  if (pattern === "") return 'expected a tool name or a pattern such as "delete_*", got an empty string';
  if (!/^[\x21-\x7E]+$/.test(pattern) || pattern.includes(","))
    return `expected a tool name or a pattern such as "delete_*" (printable ASCII, no spaces or commas, as tool names are), got ${JSON.stringify(pattern.slice(0, 60))}`;
  const other = /[?[\]{}!]/.exec(pattern)?.[0];
  if (other) return `only * is a wildcard here: ${JSON.stringify(other)} would be taken literally, and no tool name holds it`;
  if (pattern.replaceAll("*", "").length > TOOL_NAME_MAX_LENGTH)
    return `longer than any tool name (${TOOL_NAME_MAX_LENGTH} characters at most): it would match nothing`;
  return undefined;
}

const scopeName = z.string().regex(SCOPE_TOKEN, { error: "expected a scope name such as docs:read (printable ASCII, no spaces, quotes or backslashes)" });

const entries = (description: string) => z.array(z.string()).meta({ description });

/** Who may: rules of the global policy's kinds, any one admits. Checked further by access-policy.ts's parseAccessRules. */
const AccessRulesSchema = z
  .strictObject({
    users: entries("logins, subjects (github:583231, client:<id>) or verified e-mails, with * globs"),
    emailDomains: entries("verified e-mail domains, e.g. acme.com"),
    githubOrgs: entries("GitHub organizations or teams: acme, acme/platform (UPSTREAM_PROVIDER=github)"),
    groups: entries("groups of the OIDC groups claim (not with UPSTREAM_PROVIDER=github)"),
  })
  .partial()
  .superRefine((rules, ctx) => {
    if (Object.values(rules).every((list) => !Array.isArray(list) || list.length === 0))
      ctx.addIssue({
        code: "custom",
        message: "names nobody, so nobody would be let in: list users, emailDomains, githubOrgs or groups, or leave it out",
      });
  });

const ToolRuleSchema = z
  .strictObject({
    match: z
      .string()
      .superRefine((pattern, ctx) => {
        const problem = toolPatternProblem(pattern);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      })
      .meta({ description: 'a tool name, or a pattern where * stands for any characters: "delete_*", "*"' }),
    allow: AccessRulesSchema.optional().meta({ description: "only these users may call it (within the server's access)" }),
    requireScope: scopeName
      .optional()
      .meta({ description: "the token must carry this scope (one of the server's scopes, or mcp); without it the client steps up" }),
    deny: z.boolean().optional().meta({ description: "true: nobody may call it" }),
  })
  .superRefine((rule, ctx) => {
    if (rule.deny === true && (rule.allow !== undefined || rule.requireScope !== undefined))
      ctx.addIssue({
        code: "custom",
        path: ["deny"],
        message: "a denied tool is refused to everyone: allow and requireScope would never apply; drop them or deny",
      });
  })
  .meta({ description: "tried in order; the first whose match names the tool decides" });

/** Marks an issue that concerns a mapping's key (a name), not its value: reported at the key. */
export const AT_KEY = { at: "key" } as const;

const present = (value: unknown): boolean => value !== undefined;
const record = (value: unknown): Readonly<Record<string, unknown>> | undefined =>
  typeof value === "object" && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;

/** What a server's own rules may name: its scopes, or `mcp` (always understood). */
function knownScopes(scopes: unknown): string[] {
  const declared = Object.keys(record(scopes) ?? {});
  return [...new Set(["mcp", ...declared])];
}

export const ServerSchema = z
  .strictObject({
    name: z
      .string()
      .regex(SERVER_NAME, { error: "expected a URL-safe name: lower-case letters, digits and -, at most 63 characters, e.g. docs" })
      .meta({ description: "required, URL-safe: served at PUBLIC_URL/mcp/<name>" }),
    title: z.string().trim().min(1).max(80).optional().meta({ description: "how the consent page, the front page and the resource metadata name it" }),
    description: z.string().trim().min(1).max(500).optional().meta({ description: "a sentence for the consent page and the front page" }),
    url: z
      .string()
      .refine(isPlainHttpUrl, { error: "expected an absolute http(s) URL without query or fragment, e.g. http://127.0.0.1:8080/mcp" })
      // Editors see the file before ${NAME} is filled in: the pattern lets a reference through.
      .meta({ description: "a Streamable HTTP MCP server (or command: a stdio one)", pattern: "^(https?://|\\$\\{)" })
      .optional(),
    command: z
      .union([z.string(), z.array(z.string()).min(1)], { error: "expected a command line, or a list of its words" })
      .optional()
      .meta({ description: "a stdio MCP server, run once per MCP session: a command line (split like a shell would, without a shell) or a list of words" }),
    cwd: z.string().optional().meta({ description: "the folder the stdio server runs in (relative to the broker's working directory)" }),
    env: z
      .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
      .optional()
      .meta({ description: "fixed variables for the stdio server" }),
    tokenEnv: z.string().optional().meta({ description: "the variable that receives the user's upstream access token (stdio)" }),
    default: z.boolean().optional().meta({ description: "also served at PUBLIC_URL/mcp (a catalogue of one is)" }),
    forwardUpstreamToken: z.boolean().optional().meta({ description: "send the user's upstream access token (X-Upstream-Access-Token)" }),
    scopes: z
      .record(scopeName, z.string().trim().min(1))
      .optional()
      .meta({ description: "the scopes clients may ask for at this server, each with what the consent page says about it" }),
    scopeImplies: z.record(scopeName, z.array(scopeName).min(1)).optional().meta({ description: "scopes that include others: docs:write: [docs:read]" }),
    access: AccessRulesSchema.optional().meta({ description: "who may use this server: narrows, never widens, the global policy" }),
    tools: z.array(ToolRuleSchema).optional().meta({ description: "permissions per tool: the first rule whose match names the tool decides" }),
  })
  // Runs on what parsed even when a neighbouring field did not: every mistake at once.
  .superRefine(
    (server, ctx) => {
      const s = record(server) ?? {};
      if (present(s.url) && present(s.command))
        ctx.addIssue({ code: "custom", path: ["command"], message: "a server has either url (HTTP) or command (stdio), not both" });
      else if (!present(s.url) && !present(s.command))
        ctx.addIssue({ code: "custom", message: "expected url (a Streamable HTTP MCP server) or command (a stdio one)" });
      // (Without either, the line above says what is missing.)
      if (present(s.url) && !present(s.command))
        for (const key of ["cwd", "env", "tokenEnv"] as const)
          if (present(s[key])) ctx.addIssue({ code: "custom", path: [key], message: "only applies to a stdio server (command)" });
      const known = knownScopes(s.scopes);
      for (const [scope, implied] of Object.entries(record(s.scopeImplies) ?? {})) {
        const problem = impliedScopeProblem(scope, known, "scopes");
        if (problem) ctx.addIssue({ code: "custom", path: ["scopeImplies", scope], message: problem, params: AT_KEY });
        for (const [i, name] of (Array.isArray(implied) ? implied : []).entries()) {
          const problemOfImplied = typeof name === "string" ? impliedScopeProblem(name, known, "scopes") : undefined;
          if (problemOfImplied) ctx.addIssue({ code: "custom", path: ["scopeImplies", scope, i], message: problemOfImplied });
        }
      }
      for (const [i, rule] of (Array.isArray(s.tools) ? s.tools : []).entries()) {
        const scope = record(rule)?.requireScope;
        if (typeof scope === "string" && !known.includes(scope))
          ctx.addIssue({
            code: "custom",
            path: ["tools", i, "requireScope"],
            message: `names the scope ${JSON.stringify(scope)}, which this server's scopes do not list (${known.join(",")}): add it there or correct the name`,
          });
      }
    },
    { when: (payload) => record(payload.value) !== undefined },
  );

export const CatalogueFileSchema = z
  .strictObject({
    servers: z
      .array(ServerSchema)
      .min(1, { error: "expected at least one server" })
      .superRefine(
        (servers, ctx) => {
          const named = new Map<string, number>();
          let firstDefault: number | undefined;
          for (const [i, server] of servers.entries()) {
            const s = record(server) ?? {};
            if (typeof s.name === "string") {
              const earlier = named.get(s.name);
              if (earlier !== undefined)
                ctx.addIssue({ code: "custom", path: [i, "name"], message: `servers[${earlier}] is already named ${s.name}: names must be unique` });
              else named.set(s.name, i);
            }
            if (s.default === true) {
              if (firstDefault !== undefined)
                ctx.addIssue({
                  code: "custom",
                  path: [i, "default"],
                  message: `servers[${firstDefault}] is already the default: only one server answers at /mcp`,
                });
              else firstDefault = i;
            }
          }
        },
        { when: (payload) => Array.isArray(payload.value) },
      )
      .meta({ description: "the MCP servers this broker fronts, each at PUBLIC_URL/mcp/<name>" }),
  })
  .meta({
    title: "mcp-auth-broker configuration file",
    description: `BROKER_CONFIG, or mcp-auth-broker serve --config FILE; \${NAME} in a value reads the environment variable NAME`,
  });

export type CatalogueFile = z.infer<typeof CatalogueFileSchema>;
export type ServerInput = z.infer<typeof ServerSchema>;

/** Each object of the file, by the key that leads to it, with the keys it knows: for "did you mean". */
export const KNOWN_KEYS = {
  file: Object.keys(CatalogueFileSchema.shape),
  server: Object.keys(ServerSchema.shape),
  tool: Object.keys(ToolRuleSchema.shape),
  access: Object.keys(AccessRulesSchema.shape),
} as const;

/** The file's JSON Schema (draft-07, which editors' YAML and JSON support reads), as `config schema` prints it. */
export function catalogueJsonSchema(): Record<string, unknown> {
  // "input": what is written in the file (a transform's result is no concern of an editor).
  return z.toJSONSchema(CatalogueFileSchema, { target: "draft-7", io: "input" });
}
