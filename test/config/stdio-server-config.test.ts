// MCP_SERVER_COMMAND and its companions as loadConfig reads them: words split like a shell would
// without a shell, one line per mistake naming the variable.
import { describe, expect, it } from "@jest/globals";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ConfigError, loadConfig } from "../../src/config/load.ts";
import { childEnvironment } from "../../src/stdio/child-environment.ts";

const KEY = Buffer.alloc(32, 7).toString("base64");
const tmp = () => mkdtempSync(path.join(tmpdir(), "mab-config-"));
const load = (env: Record<string, string>) => loadConfig({ SECRET_KEY: KEY, ...env }, tmp());

function configError(env: Record<string, string>): string {
  try {
    load(env);
  } catch (err) {
    if (err instanceof ConfigError) return err.message;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("stdio server configuration", () => {
  it("is absent without MCP_SERVER_COMMAND", () => {
    expect(load({}).stdioServer).toBeUndefined();
  });

  it("gives a request five minutes by default, as the HTTP backend does", () => {
    expect(load({ MCP_SERVER_COMMAND: "node s.js" }).stdioServer?.requestTimeoutSeconds).toBe(300);
  });

  it("splits the command like a shell, quotes and escapes included, and reads the companions", () => {
    const dir = tmp();
    const config = loadConfig(
      {
        SECRET_KEY: KEY,
        MCP_SERVER_COMMAND: `npx -y "@scope/server name" 'a b' c\\ d ""`,
        MCP_SERVER_CWD: dir,
        MCP_SERVER_ENV: `GITHUB_TOOLSETS=repos,issues GREETING="hello world"`,
        MCP_SERVER_TOKEN_ENV: "GITHUB_PERSONAL_ACCESS_TOKEN",
        MCP_STDIO_MAX_PROCESSES: "8",
        MCP_STDIO_IDLE_SECONDS: "60",
        MCP_STDIO_REQUEST_TIMEOUT_SECONDS: "30",
      },
      tmp(),
    );
    expect(config.stdioServer).toEqual({
      command: "npx",
      args: ["-y", "@scope/server name", "a b", "c d", ""],
      cwd: dir,
      env: { GITHUB_TOOLSETS: "repos,issues", GREETING: "hello world" },
      tokenEnv: "GITHUB_PERSONAL_ACCESS_TOKEN",
      maxProcesses: 8,
      maxProcessesPerUser: 2,
      idleSeconds: 60,
      requestTimeoutSeconds: 30,
    });
    expect(config.mcpServerUrl).toBeUndefined();
  });

  it("refuses what each variable cannot mean, naming the variable", () => {
    expect(configError({ MCP_SERVER_COMMAND: "node server.js", MCP_SERVER_URL: "http://127.0.0.1:9/mcp" })).toMatch(/^MCP_SERVER_COMMAND: .*both are set/);
    expect(configError({ MCP_SERVER_COMMAND: "node 'server.js" })).toMatch(/^MCP_SERVER_COMMAND: expected a closing single quote/);
    expect(configError({ MCP_SERVER_COMMAND: "node server.js | tee log" })).toMatch(/^MCP_SERVER_COMMAND: .*without a shell/);
    expect(configError({ MCP_SERVER_COMMAND: "node $HOME/server.js" })).toMatch(/^MCP_SERVER_COMMAND: .*without a shell/);
    expect(configError({ MCP_SERVER_TOKEN_ENV: "TOKEN" })).toMatch(/^MCP_SERVER_TOKEN_ENV: only applies to a stdio MCP server/);
    expect(configError({ MCP_SERVER_COMMAND: "node s.js", MCP_SERVER_TOKEN_ENV: "PATH" })).toMatch(/^MCP_SERVER_TOKEN_ENV: .*not PATH/);
    expect(configError({ MCP_SERVER_COMMAND: "node s.js", MCP_SERVER_TOKEN_ENV: "A-B" })).toMatch(
      /^MCP_SERVER_TOKEN_ENV: expected an environment variable name/,
    );
    expect(configError({ MCP_SERVER_COMMAND: "node s.js", MCP_SERVER_ENV: "NOEQUALS" })).toMatch(/^MCP_SERVER_ENV: expected NAME=value/);
    expect(configError({ MCP_SERVER_COMMAND: "node s.js", MCP_SERVER_TOKEN_ENV: "T", MCP_SERVER_ENV: "T=x" })).toMatch(/^MCP_SERVER_ENV: T receives/);
    expect(configError({ MCP_SERVER_COMMAND: "node s.js", MCP_SERVER_CWD: "/nonexistent/folder" })).toMatch(/^MCP_SERVER_CWD: expected an existing folder/);
    expect(configError({ MCP_SERVER_COMMAND: "node s.js", MCP_STDIO_MAX_PROCESSES: "0" })).toMatch(/^MCP_STDIO_MAX_PROCESSES: expected a whole number/);
    expect(configError({ MCP_SERVER_COMMAND: "node s.js", MCP_STDIO_REQUEST_TIMEOUT_SECONDS: "0" })).toMatch(
      /^MCP_STDIO_REQUEST_TIMEOUT_SECONDS: expected a whole number/,
    );
    expect(configError({ MCP_STDIO_REQUEST_TIMEOUT_SECONDS: "30" })).toMatch(/^MCP_STDIO_REQUEST_TIMEOUT_SECONDS: only applies to a stdio MCP server/);
  });
});

describe("the stdio server's environment", () => {
  it("keeps only the allow-list of the broker's, then the fixed variables, then the token", () => {
    const env = childEnvironment(
      { PATH: "/bin", HOME: "/home/b", LC_ALL: "C", SECRET_KEY: "s", DATABASE_URL: "postgres://x", UPSTREAM_CLIENT_SECRET: "c", NODE_OPTIONS: "--x" },
      { EXTRA: "1", PATH: "/opt/bin" },
      [
        { variable: "TOKEN", value: "t" },
        { variable: "GITHUB_TOKEN", value: "g" },
      ],
    );
    expect(env).toEqual({ PATH: "/opt/bin", HOME: "/home/b", LC_ALL: "C", EXTRA: "1", TOKEN: "t", GITHUB_TOKEN: "g" });
  });
});
