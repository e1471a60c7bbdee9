// The configuration file (BROKER_CONFIG) as one zod schema: its shape, and the rules that need
// nothing but the file (names, url or command, one default, the scopes rules name). What depends on
// the environment (the identity provider for access rules, folders, `${NAME}` references) is
// checked by file.ts. `mcp-auth-broker config schema` prints this schema as JSON Schema for editors.
import { z } from "zod";
import { SERVER_NAME } from "./catalogue.ts";
import { impliedScopeProblem, SCOPE_TOKEN } from "./client-interop.ts";
import { isPlainHttpUrl } from "./values.ts";

import { injectHeaderProblem, TOKEN_PLACEHOLDER } from "./connections.ts";
import { ENV_NAME } from "./values.ts";

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

const ConnectionInjectSchema = z.union(
  [
    z.strictObject({
      header: z.string().superRefine((header, ctx) => {
        const problem = injectHeaderProblem(header);
        if (problem) ctx.addIssue({ code: "custom", message: problem });
      }),
      format: z
        .string()
        .refine((f) => f.includes(TOKEN_PLACEHOLDER), { error: `expected a format holding ${TOKEN_PLACEHOLDER}, e.g. "Bearer {token}"` })
        .refine((f) => !/[\r\n]/.test(f), { error: "a header value cannot hold a line break" })
        .optional(),
    }),
    z.strictObject({ env: z.string().regex(ENV_NAME, { error: "expected a variable name: letters, digits and _, e.g. GITHUB_TOKEN" }) }),
  ],
  { error: 'expected { header: NAME, format: "Bearer {token}" } (HTTP) or { env: NAME } (stdio)' },
);

/** A server's connectionInject against its kind: a header for HTTP, a variable for stdio (required there). */
function connectionInjectProblems(s: Readonly<Record<string, unknown>>, ctx: z.RefinementCtx): void {
  const inject = record(s.connectionInject);
  if (Array.isArray(s.exchangeClients) && s.exchangeClients.length > 0 && !present(s.connection))
    ctx.addIssue({
      code: "custom",
      path: ["exchangeClients"],
      message: "names clients that exchange for this server's connection, but it names no connection: add connection",
    });
  if (inject && !present(s.connection))
    ctx.addIssue({
      code: "custom",
      path: ["connectionInject"],
      message: "says how a connection's token is passed, but the server names no connection: add connection",
    });
  if (!present(s.connection)) return;
  if (present(s.command) && !present(inject?.env))
    ctx.addIssue({
      code: "custom",
      path: ["connectionInject"],
      message: "a stdio server receives the connection's token in its environment: write connectionInject: { env: NAME }",
    });
  const variable = inject?.env;
  if (typeof variable === "string" && (variable === s.tokenEnv || Object.hasOwn(record(s.env) ?? {}, variable)))
    ctx.addIssue({
      code: "custom",
      path: ["connectionInject", "env"],
      message: `${variable} is already the upstream token's variable (tokenEnv) or a fixed one (env): choose another name`,
    });
  if (present(s.url) && present(inject?.env))
    ctx.addIssue({
      code: "custom",
      path: ["connectionInject", "env"],
      message: 'an HTTP server receives the token in a header: write { header: Authorization, format: "Bearer {token}" }',
    });
}

/** A connection name: in the URL PUBLIC_URL/account/connect/<name>. */
const CONNECTION_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

const httpsOrLoopback = z
  .string()
  .refine(isPlainHttpUrl, { error: "expected an absolute http(s) URL without query or fragment" })
  .meta({ pattern: "^(https?://|\\$\\{)" });

const connectionCommon = {
  title: z.string().trim().min(1).max(80).optional().meta({ description: "how pages name the service (default: GitHub, Google, or the provider's host)" }),
  clientId: z.string().min(1).meta({ description: "the broker's client id at the service" }),
  clientSecret: z.string().min(1).meta({ description: "its client secret (write $\u007bNAME} to read it from the environment)" }),
  scopes: z
    .array(z.string().regex(SCOPE_TOKEN, { error: "expected a scope name (printable ASCII, no spaces)" }))
    .optional()
    .meta({ description: "the scopes asked of the user" }),
};

export const ConnectionSchema = z
  .discriminatedUnion(
    "provider",
    [
      z.strictObject({
        provider: z.literal("github"),
        ...connectionCommon,
        url: httpsOrLoopback.optional().meta({ description: "GitHub Enterprise Server's base URL (default https://github.com)" }),
        apiUrl: httpsOrLoopback.optional().meta({ description: "its API base URL (default https://api.github.com, or <url>/api/v3 for GHES)" }),
      }),
      z.strictObject({ provider: z.literal("google"), ...connectionCommon }),
      z.strictObject({ provider: z.literal("oidc"), ...connectionCommon, issuer: httpsOrLoopback.meta({ description: "the issuer (discovery)" }) }),
      z.strictObject({
        provider: z.literal("oauth2"),
        ...connectionCommon,
        authorizeUrl: httpsOrLoopback,
        tokenUrl: httpsOrLoopback,
        revokeUrl: httpsOrLoopback.optional().meta({ description: "RFC 7009 revocation, used at Disconnect" }),
        userinfoUrl: httpsOrLoopback.optional().meta({ description: "a JSON endpoint naming the account (id, login): shown on /account" }),
        tokenAuth: z
          .enum(["client_secret_basic", "client_secret_post"])
          .optional()
          .meta({ description: "how the broker authenticates at tokenUrl (default client_secret_basic; Linear and Atlassian document client_secret_post)" }),
        subjectField: z.string().min(1).optional().meta({ description: "the userinfo field with the account's id (default id, then sub; a.b for nested)" }),
        loginField: z.string().min(1).optional().meta({ description: "the userinfo field with the account's name (default login, username, email, name)" }),
        authorizeParams: z
          .record(z.string(), z.string())
          .optional()
          .meta({ description: "extra parameters of the authorization request, e.g. { audience: api.atlassian.com, prompt: consent }" }),
      }),
    ],
    { error: "expected provider: github, google, oidc or oauth2" },
  )
  .meta({ description: "a service where each user connects an account of their own" });

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
    connection: z
      .string()
      .optional()
      .meta({ description: "a connection of connections: the user's own token for it reaches this server (the user connects it at sign-in)" }),
    connectionInject: ConnectionInjectSchema.optional().meta({
      description: 'how the token reaches the server: { header: Authorization, format: "Bearer {token}" } (the default for HTTP) or, for stdio, { env: NAME }',
    }),
    exchangeClients: z.array(z.string().min(1).max(200)).optional().meta({
      description:
        "client ids (clients add --grant-type urn:ietf:params:oauth:grant-type:token-exchange) with which this server exchanges the X-Auth-Assertion it received for the user's connection token",
    }),
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
      connectionInjectProblems(s, ctx);
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
    connections: z
      .record(z.string().regex(CONNECTION_NAME, { error: "expected a URL-safe name: lower-case letters, digits and -, e.g. github" }), ConnectionSchema)
      .optional()
      .meta({ description: "services where each user connects an account of their own, named by servers' connection" }),
  })
  .superRefine(
    (file, ctx) => {
      const connections = Object.keys(record(file.connections) ?? {});
      for (const [i, server] of (Array.isArray(file.servers) ? file.servers : []).entries()) {
        const name = record(server)?.connection;
        if (typeof name === "string" && !connections.includes(name))
          ctx.addIssue({
            code: "custom",
            path: ["servers", i, "connection"],
            message: `names the connection ${JSON.stringify(name)}, which connections does not list${connections.length ? ` (${connections.join(", ")})` : ""}: add it there or correct the name`,
          });
      }
    },
    { when: (payload) => record(payload.value) !== undefined },
  )
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

export type ConnectionInput = z.infer<typeof ConnectionSchema>;

/** The file's JSON Schema (draft-07, which editors' YAML and JSON support reads), as `config schema` prints it. */
export function catalogueJsonSchema(): Record<string, unknown> {
  // "input": what is written in the file (a transform's result is no concern of an editor).
  return z.toJSONSchema(CatalogueFileSchema, { target: "draft-7", io: "input" });
}
