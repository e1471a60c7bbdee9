// The configuration file (BROKER_CONFIG) as loadConfig reads it: the catalogue it describes, the
// environment it may read, and every mistake at once, each at its line and column with its key, so
// that an operator fixes a file in one round. Environment-only configuration stays as it was.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${NAME} in these strings is the file's syntax, meant literally
import { describe, expect, it } from "@jest/globals";
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ConfigError, inspectConfig, loadConfig, type Config } from "../../src/config/load.ts";
import { ConfigFileError } from "../../src/config/file.ts";
import { projectRoot } from "../support/spawn.ts";

const KEY = Buffer.alloc(32, 7).toString("base64");
const tmp = () => mkdtempSync(path.join(tmpdir(), "mab-file-"));

/** A GitHub login admitting acme: what the README's example runs under. */
const GITHUB: Record<string, string> = {
  PUBLIC_URL: "https://mcp.example.com",
  SECRET_KEY: KEY,
  UPSTREAM_PROVIDER: "github",
  UPSTREAM_CLIENT_ID: "Ov23li-test",
  UPSTREAM_CLIENT_SECRET: "secret",
  ALLOWED_GITHUB_ORGS: "acme",
};
const OIDC: Record<string, string> = {
  ...GITHUB,
  UPSTREAM_PROVIDER: "oidc",
  UPSTREAM_ISSUER: "https://id.example.com",
  ALLOWED_GITHUB_ORGS: "",
  ALLOWED_GROUPS: "staff",
};

/** Writes `yaml` as broker.yaml in a new folder; returns that folder. */
function folderWith(yaml: string, name = "broker.yaml"): string {
  const dir = tmp();
  writeFileSync(path.join(dir, name), yaml);
  return dir;
}

function load(yaml: string, env: Record<string, string> = GITHUB): Config {
  return loadConfig({ ...env, BROKER_CONFIG: "broker.yaml" }, folderWith(yaml));
}

/** The file's mistakes, each `broker.yaml:line:column: key.path: message`. */
function mistakes(yaml: string, env: Record<string, string> = GITHUB): string[] {
  try {
    load(yaml, env);
  } catch (err) {
    if (err instanceof ConfigFileError) return err.problems.map((p) => p.message);
    throw err;
  }
  throw new Error("expected the file to be refused");
}

function configError(yaml: string, env: Record<string, string>): string {
  try {
    load(yaml, env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

const TWO_SERVERS = `servers:
  - name: docs
    title: Team docs
    description: The team's documentation
    url: http://127.0.0.1:8080/mcp/
    default: true
    scopes:
      docs:read: Read documents
      docs:write: Change documents
      admin: Everything
    scopeImplies:
      admin: [docs:write]
      docs:write: [docs:read]
    access:
      users: [octocat, "*@acme.com"]
      emailDomains: ["@Acme.COM"]
      githubOrgs: [acme/platform]
    tools:
      - { match: "admin_*", deny: true }
      - { match: "delete_*", allow: { users: [hubot] }, requireScope: docs:write }
      - { match: "*", requireScope: docs:read }
  - name: notes
    command: [node, "notes server.js", --port, "0"]
    cwd: .
    env: { NOTES_DIR: ./notes, VERBOSE: 1, COLOR: false }
    tokenEnv: GITHUB_TOKEN
    forwardUpstreamToken: true
`;

describe("the configuration file", () => {
  it("loads into the catalogue it describes, each server at PUBLIC_URL/mcp/<name>", () => {
    const dir = folderWith(TWO_SERVERS);
    const config = loadConfig({ ...GITHUB, BROKER_CONFIG: "broker.yaml" }, dir);
    expect(config.catalogue.source).toEqual({ kind: "file", path: path.join(dir, "broker.yaml") });
    const [docs, notes] = config.catalogue.servers;
    expect(docs).toEqual({
      name: "docs",
      title: "Team docs",
      description: "The team's documentation",
      path: "/mcp/docs",
      resourceUrl: "https://mcp.example.com/mcp/docs",
      isDefault: true,
      // Trailing slashes dropped, as MCP_SERVER_URL's are.
      backend: { kind: "http", url: "http://127.0.0.1:8080/mcp" },
      forwardUpstreamToken: false,
      scopes: {
        supported: ["docs:read", "docs:write", "admin"],
        descriptions: expect.objectContaining({ "docs:read": "Read documents", admin: "Everything", mcp: expect.any(String) }),
        // Closed: admin gives docs:write, and through it docs:read.
        implies: { admin: ["docs:read", "docs:write"], "docs:write": ["docs:read"] },
      },
      // The global policy's rules: a leading @ dropped, domains lower-cased, teams split.
      access: { users: ["octocat", "*@acme.com"], emailDomains: ["acme.com"], githubOrgs: [{ org: "acme", team: "platform" }], groups: [] },
      tools: [
        { match: "admin_*", deny: true },
        { match: "delete_*", allow: { users: ["hubot"], emailDomains: [], githubOrgs: [], groups: [] }, requireScope: "docs:write" },
        { match: "*", allow: undefined, requireScope: "docs:read" },
      ],
      // Neither a connected account nor servers exchanging for one.
      connection: undefined,
      exchangeClients: [],
    });
    expect(notes).toMatchObject({
      name: "notes",
      title: "notes",
      path: "/mcp/notes",
      resourceUrl: "https://mcp.example.com/mcp/notes",
      isDefault: false,
      forwardUpstreamToken: true,
      scopes: { supported: ["mcp"], implies: {} },
      access: undefined,
      tools: [],
      backend: {
        kind: "stdio",
        server: {
          // A list is taken word for word: no shell splitting of "notes server.js".
          command: "node",
          args: ["notes server.js", "--port", "0"],
          cwd: dir,
          env: { NOTES_DIR: "./notes", VERBOSE: "1", COLOR: "false" },
          tokenEnv: "GITHUB_TOKEN",
          maxProcesses: 32,
        },
      },
    });
  });

  it("keeps the one-server fields meaning the default entry, for the code that reads them", () => {
    const config = load(TWO_SERVERS);
    expect(config.mcpServerUrl).toBe("http://127.0.0.1:8080/mcp");
    expect(config.stdioServer).toBeUndefined();
    expect(config.resourceUrl).toBe("https://mcp.example.com/mcp/docs");
    expect(config.resourceName).toBe("Team docs");
    expect(config.forwardUpstreamToken).toBe(false);
  });

  it("makes a lone server the default; with several and none marked, /mcp is nobody's and the first stands for the one-server fields", () => {
    const one = load("servers:\n  - name: solo\n    url: http://127.0.0.1:9/mcp\n");
    expect(one.catalogue.servers.map((s) => [s.name, s.isDefault, s.path])).toEqual([["solo", true, "/mcp/solo"]]);
    const lone = load("servers:\n  - name: solo\n    url: http://127.0.0.1:9/mcp\n    default: false\n");
    expect(lone.catalogue.servers[0]?.isDefault).toBe(false);
    const two = load(
      "servers:\n  - name: notes\n    command: node notes.js\n    forwardUpstreamToken: true\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n",
    );
    expect(two.catalogue.servers.map((s) => s.isDefault)).toEqual([false, false]);
    expect(two.stdioServer).toMatchObject({ command: "node", args: ["notes.js"] });
    expect(two.mcpServerUrl).toBeUndefined();
    expect(two.forwardUpstreamToken).toBe(true);
    expect(two.resourceUrl).toBe("https://mcp.example.com/mcp/notes");
  });

  it("takes tool rules on a stdio server as on an HTTP one (the /mcp front end enforces them for both)", () => {
    const config = load("servers:\n  - name: notes\n    command: [node, s.js]\n    tools:\n      - { match: delete_*, deny: true }\n");
    expect(config.catalogue.servers[0]).toMatchObject({ backend: { kind: "stdio" }, tools: [{ match: "delete_*", deny: true }] });
  });

  it("splits a command line like MCP_SERVER_COMMAND, and refuses what a shell would do differently", () => {
    const config = load(`servers:\n  - name: gh\n    command: npx -y "@scope/server name" 'a b'\n`);
    expect(config.stdioServer).toMatchObject({ command: "npx", args: ["-y", "@scope/server name", "a b"] });
    expect(mistakes(`servers:\n  - name: gh\n    command: node server.js | tee log\n`)).toEqual([
      expect.stringMatching(/^broker\.yaml:3:14: servers\[0\]\.command: the command is run without a shell/),
    ]);
  });

  it("applies MCP_STDIO_* to the file's stdio servers, and refuses them when it has none", () => {
    const config = load("servers:\n  - name: notes\n    command: node notes.js\n", { ...GITHUB, MCP_STDIO_MAX_PROCESSES: "8", MCP_STDIO_IDLE_SECONDS: "60" });
    expect(config.stdioServer).toMatchObject({ maxProcesses: 8, maxProcessesPerUser: 2, idleSeconds: 60 });
    expect(configError("servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n", { ...GITHUB, MCP_STDIO_IDLE_SECONDS: "60" })).toMatch(
      /^MCP_STDIO_IDLE_SECONDS: only applies to stdio MCP servers, and broker\.yaml lists none/,
    );
  });
});

describe("${NAME} in the configuration file", () => {
  it("reads the environment in values, never in keys; $${ is a literal ${; a value is never read as YAML", () => {
    const config = load(
      `servers:
  - name: docs
    url: \${DOCS_URL}
    title: "\${TITLE}"
    description: costs $\${AMOUNT} and \${PRICE}
    tools:
      - { match: "\${TOOL}" }
`,
      { ...GITHUB, DOCS_URL: "http://127.0.0.1:8080/mcp", TITLE: "docs: {a: [1]}", PRICE: "$5", TOOL: "search_docs" },
    );
    const docs = config.catalogue.servers[0]!;
    expect(docs.backend).toEqual({ kind: "http", url: "http://127.0.0.1:8080/mcp" });
    expect(docs.title).toBe("docs: {a: [1]}");
    expect(docs.description).toBe("costs ${AMOUNT} and $5");
    expect(docs.tools).toEqual([{ match: "search_docs", allow: undefined, requireScope: undefined }]);
    // A reference in a key is no reference: "${X}" is an unknown key.
    expect(mistakes("servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    ${X}: 1\n", { ...GITHUB, X: "title" })).toEqual([
      expect.stringMatching(/^broker\.yaml:4:5: servers\[0\]\.\$\{X\}: \$\{X\} is not a setting here/),
    ]);
  });

  it("refuses a variable that is not set (or empty) at its value's line and column, and a malformed or unclosed reference", () => {
    expect(
      mistakes("servers:\n  - name: docs\n    url: ${DOCS_URL}\n    title: x ${EMPTY}\n    description: ${not a name}\n    tools:\n      - match: ${OPEN\n", {
        ...GITHUB,
        EMPTY: "",
        OPEN: "x",
      }),
    ).toEqual([
      "broker.yaml:3:10: servers[0].url: refers to the environment variable DOCS_URL, which is not set: set it (in the environment or .env), or write $${ for a literal ${",
      // The unfilled reference is no URL either.
      expect.stringMatching(/^broker\.yaml:3:10: servers\[0\]\.url: expected an absolute http\(s\) URL/),
      "broker.yaml:4:12: servers[0].title: refers to the environment variable EMPTY, which is not set: set it (in the environment or .env), or write $${ for a literal ${",
      'broker.yaml:5:18: servers[0].description: expected ${NAME} with a variable name (letters, digits, _), got "${not a name}"; write $${ for a literal ${',
      'broker.yaml:7:16: servers[0].tools[0].match: expected ${NAME} with a variable name (letters, digits, _), got "${OPEN"; write $${ for a literal ${',
      expect.stringMatching(/^broker\.yaml:7:16: servers\[0\]\.tools\[0\]\.match: only \* is a wildcard here: "\{"/),
    ]);
  });
});

describe("mistakes in the configuration file", () => {
  // Each kind of mistake, at the line and column of what is wrong, with its key.
  it.each<[string, string, Record<string, string>, string[]]>([
    ["YAML that does not parse", "servers:\n  - name: docs\n    url: [http://x\n", GITHUB, ["broker.yaml:4:1: "]],
    ["a key given twice", "servers:\n  - name: docs\n    name: docs2\n    url: http://127.0.0.1:9/mcp\n", GITHUB, ["broker.yaml:3:5: Map keys must be unique"]],
    ["an empty file", "", GITHUB, ["broker.yaml:1:1: the file is empty: it lists the servers under servers:"]],
    ["no server", "servers: []\n", GITHUB, ["broker.yaml:1:10: servers: expected at least one server"]],
    [
      "a name that is not URL-safe",
      "servers:\n  - name: Team Docs\n    url: http://127.0.0.1:9/mcp\n",
      GITHUB,
      ["broker.yaml:2:11: servers[0].name: expected a URL-safe name"],
    ],
    ["a missing name", "servers:\n  - url: http://127.0.0.1:9/mcp\n", GITHUB, ["broker.yaml:2:5: servers[0].name: required"]],
    [
      "a name given twice",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n  - name: docs\n    url: http://127.0.0.1:8/mcp\n",
      GITHUB,
      ["broker.yaml:4:11: servers[1].name: servers[0] is already named docs: names must be unique"],
    ],
    [
      "two defaults",
      "servers:\n  - name: a\n    url: http://127.0.0.1:9/mcp\n    default: true\n  - name: b\n    url: http://127.0.0.1:8/mcp\n    default: true\n",
      GITHUB,
      ["broker.yaml:7:14: servers[1].default: servers[0] is already the default: only one server answers at /mcp"],
    ],
    [
      "neither url nor command",
      "servers:\n  - name: docs\n    title: Docs\n",
      GITHUB,
      ["broker.yaml:2:5: servers[0]: expected url (a Streamable HTTP MCP server) or command (a stdio one)"],
    ],
    [
      "both url and command",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    command: node s.js\n",
      GITHUB,
      ["broker.yaml:4:14: servers[0].command: a server has either url (HTTP) or command (stdio), not both"],
    ],
    [
      "a url that is not http(s)",
      "servers:\n  - name: docs\n    url: ftp://files.example.com/mcp\n",
      GITHUB,
      ["broker.yaml:3:10: servers[0].url: expected an absolute http(s) URL"],
    ],
    [
      "a url with a query",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp?x=1\n",
      GITHUB,
      ["broker.yaml:3:10: servers[0].url: expected an absolute http(s) URL without query"],
    ],
    [
      "a wrong type",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    title: 42\n",
      GITHUB,
      ["broker.yaml:4:12: servers[0].title: expected a string, got number 42"],
    ],
    [
      "a misspelt key",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    forwardUpstreamTokn: true\n",
      GITHUB,
      ["broker.yaml:4:5: servers[0].forwardUpstreamTokn: forwardUpstreamTokn is not a setting here (did you mean forwardUpstreamToken?)"],
    ],
    [
      "a connection that connections does not list",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    connection: github\n",
      GITHUB,
      ['broker.yaml:4:17: servers[0].connection: names the connection "github", which connections does not list: add it there or correct the name'],
    ],
    [
      "a connection without its client credentials, injected as a header the broker sets",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    connection: github\n    connectionInject: { header: X-Auth-User }\nconnections:\n  github: { provider: github }\n",
      GITHUB,
      [
        "broker.yaml:5:33: servers[0].connectionInject.header: X-Auth-User is set by the broker or by HTTP itself",
        "broker.yaml:7:11: connections.github.clientId: required",
        "broker.yaml:7:11: connections.github.clientSecret: required",
      ],
    ],
    [
      "a connection's variable that is also the upstream token's",
      "servers:\n  - name: docs\n    command: node server.js\n    tokenEnv: TOKEN\n    connection: gh\n    connectionInject: { env: TOKEN }\nconnections:\n  gh: { provider: github, clientId: a, clientSecret: b }\n",
      GITHUB,
      ["broker.yaml:6:30: servers[0].connectionInject.env: TOKEN is already the upstream token's variable (tokenEnv) or a fixed one (env)"],
    ],
    [
      "a stdio server whose connection has no variable, and an unknown provider",
      "servers:\n  - name: docs\n    command: node server.js\n    connection: slack\nconnections:\n  slack: { provider: slack, clientId: a, clientSecret: b }\n",
      GITHUB,
      [
        "broker.yaml:2:5: servers[0].connectionInject: a stdio server receives the connection's token in its environment: write connectionInject: { env: NAME }",
        "broker.yaml:6:22: connections.slack.provider: expected provider: github, google, oidc or oauth2",
      ],
    ],
    [
      "a scope name with a space",
      'servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    scopes:\n      "docs read": Read\n',
      GITHUB,
      ['broker.yaml:5:7: servers[0].scopes["docs read"]: expected a scope name such as docs:read'],
    ],
    [
      "an implication naming a scope the server does not have, and offline_access",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    scopes: { docs:read: Read }\n    scopeImplies:\n      docs:write: [docs:read]\n      docs:read: [offline_access]\n",
      GITHUB,
      [
        'broker.yaml:6:7: servers[0].scopeImplies.docs:write: names the scope "docs:write", which scopes does not list (mcp,docs:read): add it there or correct the name',
        "broker.yaml:7:19: servers[0].scopeImplies.docs:read[0]: offline_access asks for refresh tokens; it is no permission, so it neither implies nor is implied",
      ],
    ],
    [
      "a tool rule requiring a scope the server does not have",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    scopes: { docs:read: Read }\n    tools:\n      - match: update_*\n        requireScope: docs:write\n",
      GITHUB,
      ['broker.yaml:7:23: servers[0].tools[0].requireScope: names the scope "docs:write", which this server\'s scopes do not list (mcp,docs:read)'],
    ],
    [
      "glob syntax that is not ours, an empty pattern, a space",
      'servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    tools:\n      - match: delete_?\n      - match: "[ab]*"\n      - match: ""\n      - match: "get doc"\n',
      GITHUB,
      [
        'broker.yaml:5:16: servers[0].tools[0].match: only * is a wildcard here: "?" would be taken literally',
        'broker.yaml:6:16: servers[0].tools[1].match: only * is a wildcard here: "["',
        'broker.yaml:7:16: servers[0].tools[2].match: expected a tool name or a pattern such as "delete_*", got an empty string',
        'broker.yaml:8:16: servers[0].tools[3].match: expected a tool name or a pattern such as "delete_*" (printable ASCII, no spaces or commas',
      ],
    ],
    [
      "a pattern longer than any tool name",
      `servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    tools:\n      - match: "${"a".repeat(129)}*"\n`,
      GITHUB,
      ["broker.yaml:5:16: servers[0].tools[0].match: longer than any tool name (128 characters at most): it would match nothing"],
    ],
    [
      "a denied tool with conditions that would never apply",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    tools:\n      - { match: drop_all, deny: true, requireScope: mcp }\n",
      GITHUB,
      ["broker.yaml:5:34: servers[0].tools[0].deny: a denied tool is refused to everyone"],
    ],
    [
      "access that names nobody",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    access: { users: [], githubOrgs: [] }\n",
      GITHUB,
      ["broker.yaml:4:13: servers[0].access: names nobody, so nobody would be let in"],
    ],
    [
      "access rules the global policy refuses too",
      'servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    access:\n      users: ["*", "a b"]\n      emailDomains: [acme]\n      githubOrgs: [a/b/c]\n',
      GITHUB,
      [
        'broker.yaml:5:15: servers[0].access.users[0]: a lone "*" would admit everyone: leave the list out to let in whoever the global policy admits',
        'broker.yaml:5:20: servers[0].access.users[1]: expected entries without spaces, got "a b"',
        'broker.yaml:6:22: servers[0].access.emailDomains[0]: expected domain names such as acme.com (xn-- form for international ones), got "acme"',
        'broker.yaml:7:20: servers[0].access.githubOrgs[0]: expected entries like acme or acme/platform (organization or organization/team), got "a/b/c"',
      ],
    ],
    [
      "groups with GitHub login",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    tools:\n      - { match: x, allow: { groups: [staff] } }\n",
      GITHUB,
      ["broker.yaml:5:38: servers[0].tools[0].allow.groups: GitHub sends no group claim: use githubOrgs (org or org/team) instead"],
    ],
    [
      "GitHub organizations with OIDC login",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    access: { githubOrgs: [acme] }\n",
      OIDC,
      [
        "broker.yaml:4:27: servers[0].access.githubOrgs: organizations can only be checked with UPSTREAM_PROVIDER=github (it is oidc); use groups for OIDC groups",
      ],
    ],
    [
      "stdio settings the environment refuses too",
      'servers:\n  - name: notes\n    command: "node \'s.js"\n    tokenEnv: PATH\n    env: { A-B: x }\n    cwd: /nonexistent/folder\n',
      GITHUB,
      [
        "broker.yaml:3:14: servers[0].command: expected a closing single quote",
        "broker.yaml:4:15: servers[0].tokenEnv: expected a variable of the server's own (e.g. GITHUB_PERSONAL_ACCESS_TOKEN), not PATH",
        'broker.yaml:5:12: servers[0].env.A-B: expected an environment variable name (letters, digits, _), got "A-B"',
        "broker.yaml:6:10: servers[0].cwd: expected an existing folder, /nonexistent/folder is not one",
      ],
    ],
    [
      "a fixed variable that also receives the token",
      "servers:\n  - name: notes\n    command: [node, s.js]\n    tokenEnv: TOKEN\n    env:\n      TOKEN: fixed\n",
      GITHUB,
      ["broker.yaml:6:7: servers[0].env.TOKEN: TOKEN receives each user's upstream token (tokenEnv): it cannot also be fixed"],
    ],
    [
      "stdio settings on an HTTP server",
      "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    tokenEnv: TOKEN\n",
      GITHUB,
      ["broker.yaml:4:15: servers[0].tokenEnv: only applies to a stdio server (command)"],
    ],
  ])("%s", (_kind, yaml, env, expected) => {
    const found = mistakes(yaml, env);
    expect(found).toHaveLength(expected.length);
    for (const [i, line] of expected.entries()) expect(found[i]!.slice(0, line.length)).toBe(line);
  });

  it("reports every mistake at once, in the order of the file, for the start-up and for check", () => {
    const yaml = `servers:
  - name: Docs
    url: http://127.0.0.1:9/mcp
  - name: notes
    command: node notes.js
    titel: Notes
  - name: wiki
    url: \${WIKI_URL}
    tools:
      - { match: "*", requireScope: wiki:write }
    access: { groups: [staff] }
`;
    const expected = [
      /^broker\.yaml:2:11: servers\[0\]\.name: expected a URL-safe name/,
      /^broker\.yaml:6:5: servers\[1\]\.titel: titel is not a setting here \(did you mean title\?\)/,
      /^broker\.yaml:8:10: servers\[2\]\.url: refers to the environment variable WIKI_URL, which is not set/,
      /^broker\.yaml:8:10: servers\[2\]\.url: expected an absolute http\(s\) URL/,
      /^broker\.yaml:10:37: servers\[2\]\.tools\[0\]\.requireScope: names the scope "wiki:write"/,
      /^broker\.yaml:11:23: servers\[2\]\.access\.groups: GitHub sends no group claim/,
    ];
    const found = mistakes(yaml);
    expect(found).toHaveLength(expected.length);
    for (const [i, pattern] of expected.entries()) expect(found[i]).toMatch(pattern);

    // What the start-up says: one error naming the file, every mistake on its own line under it.
    const error = configError(yaml, GITHUB);
    expect(error.split("\n")).toEqual([`BROKER_CONFIG: broker.yaml has ${expected.length} mistakes:`, ...found.map((line) => `  ${line}`)]);

    // check's list: each mistake as a problem of its own, besides the environment's own mistakes.
    const inspection = inspectConfig({ ...GITHUB, BROKER_CONFIG: "broker.yaml", LOG_LEVEL: "chatty" }, folderWith(yaml));
    expect(inspection.problems.map((p) => p.message)).toEqual([expect.stringMatching(/^LOG_LEVEL: expected one of/), ...found]);
    // The file set aside is no missing MCP server: its servers were named, wrongly.
    expect(inspection.problems.map((p) => p.variable)).not.toContain("MCP_SERVER_URL");
  });

  it("says which file cannot be read, and from which folder it was looked for", () => {
    const dir = tmp();
    expect(() => loadConfig({ ...GITHUB, BROKER_CONFIG: "missing.yaml" }, dir)).toThrow(
      `BROKER_CONFIG: cannot read ${path.join(dir, "missing.yaml")} (ENOENT): correct the path (it is relative to ${dir}), or make the file readable`,
    );
    mkdirSync(path.join(dir, "folder.yaml"));
    expect(() => loadConfig({ ...GITHUB, BROKER_CONFIG: "folder.yaml" }, dir)).toThrow(/\(EISDIR\)/);
  });
});

describe("the file beside the environment's own server", () => {
  const FILE = "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n";

  it("refuses the variables of the one server, each naming the key that replaces it", () => {
    expect(configError(FILE, { ...GITHUB, MCP_SERVER_URL: "http://127.0.0.1:8/mcp" })).toBe(
      "MCP_SERVER_URL: either the file's servers (BROKER_CONFIG=broker.yaml) or MCP_SERVER_URL, not both: write it as url of a server in the file, and remove MCP_SERVER_URL",
    );
    expect(configError(FILE, { ...GITHUB, MCP_SERVER_COMMAND: "node s.js" })).toMatch(
      /^MCP_SERVER_COMMAND: either the file's servers .* or MCP_SERVER_COMMAND, not both/,
    );
    expect(configError(FILE, { ...GITHUB, MCP_SERVER_TOKEN_ENV: "T" })).toMatch(/^MCP_SERVER_TOKEN_ENV: is replaced by broker\.yaml: write it as tokenEnv/);
    expect(configError(FILE, { ...GITHUB, RESOURCE_NAME: "Docs" })).toMatch(/^RESOURCE_NAME: is replaced by broker\.yaml: write it as title/);
    expect(configError(FILE, { ...GITHUB, FORWARD_UPSTREAM_TOKEN: "true" })).toMatch(
      /^FORWARD_UPSTREAM_TOKEN: is replaced by broker\.yaml: write it as forwardUpstreamToken/,
    );
    // .env.example's default says nothing the file would contradict.
    expect(load(FILE, { ...GITHUB, FORWARD_UPSTREAM_TOKEN: "false" }).catalogue.servers).toHaveLength(1);
  });

  it("leaves an environment-only configuration as it was: one server, named mcp, at /mcp", () => {
    const config = loadConfig({ ...GITHUB, MCP_SERVER_URL: "http://127.0.0.1:8/mcp", RESOURCE_NAME: "Docs" }, tmp());
    expect(config.catalogue.source).toEqual({ kind: "environment" });
    expect(config.catalogue.servers.map((s) => [s.name, s.path, s.resourceUrl, s.title, s.isDefault])).toEqual([
      ["mcp", "/mcp", "https://mcp.example.com/mcp", "Docs", true],
    ]);
    expect(config.resourceUrl).toBe("https://mcp.example.com/mcp");
    expect(config.mcpServerUrl).toBe("http://127.0.0.1:8/mcp");
  });
});

describe("the README's example (examples/broker.yaml)", () => {
  const example = readFileSync(path.join(projectRoot, "examples/broker.yaml"), "utf8");
  const readme = readFileSync(path.join(projectRoot, "README.md"), "utf8");
  /** What the README's .env gives the file. */
  const STAND_INS = {
    ...GITHUB,
    GITHUB_MCP_URL: "http://127.0.0.1:8082/mcp",
    DOCS_MCP_URL: "http://127.0.0.1:8080/mcp",
    NOTES_MCP_COMMAND: "npx -y @modelcontextprotocol/server-memory",
  };
  const section = readme.slice(readme.indexOf("## Several MCP servers"), readme.indexOf("\n## ", readme.indexOf("## Several MCP servers") + 1));

  it("is what the README quotes, word for word", () => {
    expect(section).not.toBe("");
    expect(/```yaml\n([\s\S]*?)```/.exec(section)?.[1]).toBe(example);
  });

  it("loads as the README says: GitHub over HTTP, the docs with tool rules at /mcp too, a stdio server", () => {
    const config = loadConfig({ ...STAND_INS, BROKER_CONFIG: "examples/broker.yaml" }, projectRoot);
    const [github, docs, notes] = config.catalogue.servers;
    expect(github).toMatchObject({ name: "github", isDefault: false, forwardUpstreamToken: true, backend: { kind: "http", url: "http://127.0.0.1:8082/mcp" } });
    expect(docs).toMatchObject({
      name: "docs",
      isDefault: true,
      backend: { kind: "http", url: "http://127.0.0.1:8080/mcp" },
      scopes: { supported: ["docs:read", "docs:write"], implies: { "docs:write": ["docs:read"] } },
    });
    expect(docs?.tools.map((t) => [t.match, t.deny ?? false, t.deny ? undefined : t.requireScope])).toEqual([
      ["admin_*", true, undefined],
      ["delete_*", false, "docs:write"],
      ["update_*", false, "docs:write"],
      ["*", false, "docs:read"],
    ]);
    expect(notes).toMatchObject({
      name: "notes",
      backend: {
        kind: "stdio",
        server: { command: "npx", args: ["-y", "@modelcontextprotocol/server-memory"], env: { MEMORY_FILE_PATH: "./data/notes.jsonl" } },
      },
    });
  });

  it("lists the mistakes of its three typos as the README shows them", () => {
    const typos = example
      .replace("url: ${DOCS_MCP_URL}", "url: docs.example.com/mcp")
      .replace("requireScope: docs:write", "requireScope: docs:wirte")
      .replace("    command: ${NOTES_MCP_COMMAND}", "    comand: ${NOTES_MCP_COMMAND}");
    const shown = [...section.matchAll(/^FAIL {2}configuration {6}(.*)$/gm)].map((m) => m[1]);
    expect(shown.length).toBeGreaterThan(2);
    expect(mistakes(typos, STAND_INS)).toEqual(shown);
  });
});
