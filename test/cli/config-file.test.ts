// The configuration file from the command line, as an operator meets it: `check --config FILE`
// lists every mistake of a file with its line and column in one round, `serve --config FILE`
// refuses to start with all of them, and `config schema` gives editors a JSON Schema that agrees
// with what the broker accepts.
// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${NAME} in these strings is the file's syntax, meant literally
import { beforeAll, describe, expect, it } from "@jest/globals";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { Ajv, type ValidateFunction } from "ajv";
import { parse as parseYaml } from "yaml";
import { runCli } from "../../src/cli/program.ts";
import { CatalogueFileSchema } from "../../src/config/catalogue-schema.ts";
import { cleanEnv, projectRoot, runCliBinary, type Finished } from "../support/spawn.ts";
import { freePort } from "../support/start-broker.ts";

const tmp = () => mkdtempSync(path.join(tmpdir(), "mab-config-file-"));

async function cli(args: string[], cwd: string, env: Record<string, string> = {}): Promise<Finished> {
  let stdout = "";
  let stderr = "";
  const code = await runCli(args, {
    cwd,
    env: cleanEnv(env),
    out: (s) => {
      stdout += s;
    },
    err: (s) => {
      stderr += s;
    },
  });
  return { code, stdout, stderr };
}

const failures = (out: string) => out.split("\n").filter((l) => l.startsWith("FAIL"));

/** Five mistakes of five kinds, one per line: what `check` must list all of. */
const FIVE_MISTAKES = `servers:
  - name: Docs
    url: http://127.0.0.1:9/mcp
  - name: notes
    command: node notes.js
    titel: Notes
  - name: wiki
    url: ftp://wiki.example.com/mcp
    tools:
      - { match: "delete_?" }
    connection: github
`;
const FIVE_AT = [
  /^broken\.yaml:2:11: servers\[0\]\.name: expected a URL-safe name/,
  /^broken\.yaml:6:5: servers\[1\]\.titel: titel is not a setting here \(did you mean title\?\)/,
  /^broken\.yaml:8:10: servers\[2\]\.url: expected an absolute http\(s\) URL/,
  /^broken\.yaml:10:18: servers\[2\]\.tools\[0\]\.match: only \* is a wildcard here/,
  /^broken\.yaml:11:17: servers\[2\]\.connection: names the connection "github", which connections does not list/,
];

const GOOD = "servers:\n  - name: docs\n    url: http://127.0.0.1:9/mcp\n    default: true\n  - name: notes\n    command: node notes.js\n";

describe("check --config", () => {
  it("lists all five mistakes of a file, each at its line and column, and fails", async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, "broken.yaml"), FIVE_MISTAKES);
    const res = await cli(["check", "--config", "broken.yaml"], dir, { PORT: String(await freePort()) });
    const lines = failures(res.stdout);
    expect(lines).toHaveLength(5);
    for (const [i, where] of FIVE_AT.entries()) {
      expect(lines[i]).toMatch(/^FAIL {2}configuration {6}/);
      expect(lines[i]!.replace(/^FAIL {2}configuration {6}/, "")).toMatch(where);
    }
    // The rest is still checked, and nothing claims the file's servers are fine.
    expect(res.stdout).toMatch(/^ok +listening /m);
    expect(res.stdout).not.toMatch(/^ok +(MCP server|MCP servers|configuration) /m);
    expect(res.code).toBe(1);
    expect(res.stderr).toBe("mcp-auth-broker: 5 check(s) failed\n");
  });

  it("reads BROKER_CONFIG from .env, and --config wins over it", async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, "broken.yaml"), FIVE_MISTAKES);
    writeFileSync(path.join(dir, "good.yaml"), GOOD);
    writeFileSync(path.join(dir, ".env"), "BROKER_CONFIG=broken.yaml\n");
    const port = String(await freePort());
    expect(failures((await cli(["check"], dir, { PORT: port })).stdout)).toHaveLength(5);
    const res = await cli(["check", "--config", "good.yaml"], dir, { PORT: port });
    expect(failures(res.stdout).filter((l) => /configuration/.test(l))).toEqual([]);
    expect(res.stdout).toMatch(
      new RegExp(
        `^ok +MCP servers +2 from ${path.join(dir, "good.yaml").replace(/[.]/g, "\\.")}: docs at http://localhost:${port}/mcp/docs \\(also http://localhost:${port}/mcp\\), notes at http://localhost:${port}/mcp/notes \\(stdio\\)$`,
        "m",
      ),
    );
  });
});

describe("serve --config", () => {
  it("the real process refuses a broken file at start with every mistake, exit 1, and writes nothing", async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, "broken.yaml"), FIVE_MISTAKES);
    const res = await runCliBinary(["serve", "--config", "broken.yaml"], { cwd: dir, env: { PORT: String(await freePort()), LOG_FORMAT: "pretty" } });
    expect(res.code).toBe(1);
    const [first, ...rest] = res.stderr.trimEnd().split("\n");
    expect(first).toBe("mcp-auth-broker: configuration error: BROKER_CONFIG: broken.yaml has 5 mistakes:");
    expect(rest).toHaveLength(5);
    for (const [i, where] of FIVE_AT.entries()) expect(rest[i]!.replace(/^ {2}/, "")).toMatch(where);
    expect(res.stdout).toBe("");
    // Demo mode keeps its key in ./data: not for a start that was refused.
    expect(existsSync(path.join(dir, "data"))).toBe(false);
  });
});

describe("config schema", () => {
  let schema: Record<string, unknown>;
  let validate: ValidateFunction;
  beforeAll(async () => {
    const res = await cli(["config", "schema"], tmp());
    expect(res.code).toBe(0);
    schema = JSON.parse(res.stdout) as Record<string, unknown>;
    // Strict: a keyword ajv does not know, or a malformed schema, fails the compile. Union types
    // (`type: [string, number, boolean]`) are plain draft-07.
    validate = new Ajv({ strict: true, allErrors: true, allowUnionTypes: true }).compile(schema);
  });

  it("prints a draft-07 JSON Schema of the file: servers of closed objects", () => {
    expect(schema.$schema).toBe("http://json-schema.org/draft-07/schema#");
    expect(schema).toMatchObject({ type: "object", required: ["servers"], additionalProperties: false });
    const { servers } = schema.properties as { servers: { items: { required: string[]; additionalProperties: boolean; properties: object } } };
    expect(servers.items.required).toEqual(["name"]);
    expect(servers.items.additionalProperties).toBe(false);
    expect(Object.keys(servers.items.properties)).toEqual(expect.arrayContaining(["name", "url", "command", "scopes", "access", "tools"]));
  });

  it("accepts examples/broker.yaml as written, ${NAME} references included", () => {
    const example: unknown = parseYaml(readFileSync(path.join(projectRoot, "examples/broker.yaml"), "utf8"));
    expect(validate(example)).toBe(true);
  });

  // The schema an editor checks with and the broker's own agree on the shape of a file.
  const server = { name: "docs", url: "http://127.0.0.1:9/mcp" };
  it.each<[string, boolean, unknown]>([
    ["one HTTP server", true, { servers: [server] }],
    ["a stdio server with a command list and env of scalars", true, { servers: [{ name: "n", command: ["node", "s.js"], env: { A: "x", B: 1, C: true } }] }],
    [
      "rules of every kind",
      true,
      { servers: [{ ...server, scopes: { "docs:read": "Read" }, access: { users: ["a"] }, tools: [{ match: "*", requireScope: "docs:read" }] }] },
    ],
    ["no servers key", false, {}],
    ["an empty list", false, { servers: [] }],
    ["a server without a name", false, { servers: [{ url: server.url }] }],
    ["a name that is not URL-safe", false, { servers: [{ ...server, name: "Team Docs" }] }],
    ["a URL that is not http(s)", false, { servers: [{ ...server, url: "ftp://x" }] }],
    ["an unknown key", false, { servers: [{ ...server, titel: "x" }] }],
    [
      "a connection, injected neither as a header nor a variable",
      false,
      { servers: [{ ...server, connection: "gh", connectionInject: {} }], connections: { gh: { provider: "github", clientId: "a", clientSecret: "b" } } },
    ],
    ["a connection of an unknown provider", false, { servers: [server], connections: { gh: { provider: "slack", clientId: "a", clientSecret: "b" } } }],
    [
      "a server with its connection",
      true,
      {
        servers: [{ ...server, connection: "gh", connectionInject: { header: "X-GitHub-Token" } }],
        connections: { gh: { provider: "github", clientId: "a", clientSecret: "b", scopes: ["repo"] } },
      },
    ],
    ["a default that is not a boolean", false, { servers: [{ ...server, default: "yes" }] }],
    ["a command list of numbers", false, { servers: [{ name: "n", command: [1, 2] }] }],
    ["a scope name with a space", false, { servers: [{ ...server, scopes: { "docs read": "x" } }] }],
    ["an unknown key in access", false, { servers: [{ ...server, access: { team: ["a"] } }] }],
    ["a tool rule without match", false, { servers: [{ ...server, tools: [{ deny: true }] }] }],
  ])("%s: both say valid=%s", (_what, valid, file) => {
    expect(validate(file)).toBe(valid);
    expect(CatalogueFileSchema.safeParse(file).success).toBe(valid);
  });

  it("leaves to the broker what needs more than the shape (it says so at start and in check)", () => {
    const both = { servers: [{ ...server, command: "node s.js" }] };
    expect(validate(both)).toBe(true);
    expect(CatalogueFileSchema.safeParse(both).success).toBe(false);
  });
});
