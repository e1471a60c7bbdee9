import { describe, expect, it } from "@jest/globals";
import { mkdtempSync, readFileSync, existsSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { ConfigError, loadConfig, decodeSecretKey } from "../../src/config/load.ts";
import { createUpstreamProvider } from "../../src/upstream/create.ts";
import { runToEnd, startServer, waitForOutput } from "../support/spawn.ts";
import { preparedDatabaseUrl } from "../support/broker-process.ts";
import { KNOWN_VARIABLES, unknownVariables } from "../../src/config/sources.ts";
import { serve } from "../../src/serve.ts";
import { createServer, type AddressInfo } from "node:net";

const KEY = Buffer.alloc(32, 7).toString("base64");
const tmp = () => mkdtempSync(path.join(tmpdir(), "mab-config-"));

function configError(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env, tmp());
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error("expected a ConfigError");
}

describe("loadConfig", () => {
  it("defaults to demo mode on localhost with a generated key kept under ./data", () => {
    const dir = tmp();
    const config = loadConfig({}, dir);
    expect(config.demoMode).toBe(true);
    expect(config.upstream.provider).toBe("demo");
    expect(config.port).toBe(3000);
    expect(config.host).toBe("127.0.0.1");
    expect(config.publicUrl).toBe("http://localhost:3000");
    expect(config.resourceUrl).toBe("http://localhost:3000/mcp");
    expect(config.databaseUrl).toBe("file:./data/broker.db");
    expect(existsSync(path.join(dir, "data/secret.key"))).toBe(true);
    // The key is stable across restarts.
    const again = loadConfig({}, dir);
    expect(again.secretKey.equals(config.secretKey)).toBe(true);
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("parses a full production configuration", () => {
    const config = loadConfig(
      {
        PORT: "8443",
        HOST: "0.0.0.0",
        PUBLIC_URL: "HTTPS://MCP.Example.com:443/",
        DATABASE_URL: "postgresql://u:p@db:5432/broker",
        MCP_SERVER_URL: "http://10.0.0.5:8080/mcp",
        UPSTREAM_PROVIDER: "github",
        UPSTREAM_CLIENT_ID: "Iv1.abc",
        UPSTREAM_CLIENT_SECRET: "shh",
        SECRET_KEY: Buffer.alloc(32, 1).toString("hex"),
        UPSTREAM_RECHECK_SECONDS: "0",
        DYNAMIC_REGISTRATION: "false",
        FORWARD_UPSTREAM_TOKEN: "true",
        ALLOWED_GITHUB_ORGS: "acme",
      },
      tmp(),
    );
    expect(config.publicUrl).toBe("https://mcp.example.com");
    expect(config.resourceUrl).toBe("https://mcp.example.com/mcp");
    expect(config.databaseKind).toBe("postgres");
    expect(config.demoMode).toBe(false);
    expect(config.upstreamRecheckSeconds).toBe(0);
    expect(config.dynamicRegistration).toBe(false);
    expect(config.forwardUpstreamToken).toBe(true);
    expect(config.upstream.githubUrl).toBe("https://github.com");
    expect(config.upstream.githubApiUrl).toBe("https://api.github.com");
    expect(config.secretKey.equals(Buffer.alloc(32, 1))).toBe(true);
    expect(config.accessPolicy.githubOrgs).toEqual([{ org: "acme", team: undefined }]);
    expect(config.resourceName).toBe("mcp.example.com");
  });

  it("gives google its issuer by default", () => {
    const config = loadConfig(
      { UPSTREAM_PROVIDER: "google", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: KEY, ALLOW_ANY_USER: "true" },
      tmp(),
    );
    expect(config.upstream.issuer).toBe("https://accounts.google.com");
  });

  it("names the provider on the consent page as UPSTREAM_DISPLAY_NAME says, else by default", () => {
    const base = {
      UPSTREAM_PROVIDER: "oidc",
      UPSTREAM_ISSUER: "https://login.acme.example/realms/main",
      UPSTREAM_CLIENT_ID: "x",
      UPSTREAM_CLIENT_SECRET: "y",
      SECRET_KEY: KEY,
      ALLOW_ANY_USER: "true",
    };
    expect(createUpstreamProvider(loadConfig(base, tmp()).upstream).displayName).toBe("login.acme.example");
    expect(createUpstreamProvider(loadConfig({ ...base, UPSTREAM_DISPLAY_NAME: " Acme SSO " }, tmp()).upstream).displayName).toBe("Acme SSO");
    const github = { UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: KEY, ALLOW_ANY_USER: "true" };
    expect(createUpstreamProvider(loadConfig(github, tmp()).upstream).displayName).toBe("GitHub");
    expect(createUpstreamProvider(loadConfig({ ...github, UPSTREAM_DISPLAY_NAME: "GitHub Enterprise" }, tmp()).upstream).displayName).toBe("GitHub Enterprise");
  });

  it.each([
    [{ PORT: "abc" }, "PORT", /port number/],
    [{ PORT: "70000" }, "PORT", /port number/],
    [{ PUBLIC_URL: "http://mcp.example.com" }, "PUBLIC_URL", /https/],
    [{ PUBLIC_URL: "not a url" }, "PUBLIC_URL", /absolute/],
    [{ DATABASE_URL: "mysql://x" }, "DATABASE_URL", /SQLite|PostgreSQL/],
    [{ UPSTREAM_PROVIDER: "facebook" }, "UPSTREAM_PROVIDER", /github, google, oidc/],
    [{ UPSTREAM_CLIENT_ID: "x" }, "UPSTREAM_PROVIDER", /github, google, oidc/],
    [{ UPSTREAM_PROVIDER: "github", SECRET_KEY: KEY }, "UPSTREAM_CLIENT_ID", /required/],
    [{ UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "x", SECRET_KEY: KEY }, "UPSTREAM_CLIENT_SECRET", /required/],
    [{ UPSTREAM_PROVIDER: "oidc", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: KEY }, "UPSTREAM_ISSUER", /required/],
    [{ UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y" }, "SECRET_KEY", /required outside demo mode/],
    [{ UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: "tooshort" }, "SECRET_KEY", /32 bytes/],
    [{ ACCESS_TOKEN_TTL_SECONDS: "-5" }, "ACCESS_TOKEN_TTL_SECONDS", /whole number/],
    [{ UPSTREAM_RECHECK_SECONDS: "soon" }, "UPSTREAM_RECHECK_SECONDS", /whole number/],
    [{ DYNAMIC_REGISTRATION: "maybe" }, "DYNAMIC_REGISTRATION", /true or false/],
    [{ LOG_LEVEL: "loud" }, "LOG_LEVEL", /one of/],
    [{ HOST: "0.0.0.0" }, "HOST", /loopback/],
    [{ MCP_SERVER_URL: "ftp://x" }, "MCP_SERVER_URL", /http/],
    [{ UPSTREAM_DISPLAY_NAME: "x".repeat(61) }, "UPSTREAM_DISPLAY_NAME", /1 to 60 characters/],
  ])("rejects %j naming %s", (env, variable, expectation) => {
    const err = configError(env as Record<string, string>);
    expect(err.variable).toBe(variable);
    expect(err.message).toMatch(expectation);
    expect(err.message).not.toContain("\n");
  });

  it("never echoes a secret key back in its error", () => {
    const err = configError({ UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: "c2VjcmV0LXZhbHVl" });
    expect(err.message).not.toContain("c2VjcmV0LXZhbHVl");
  });

  it("decodes hex and base64 keys and refuses short ones", () => {
    expect(decodeSecretKey(Buffer.alloc(32, 3).toString("hex"))?.length).toBe(32);
    expect(decodeSecretKey(Buffer.alloc(48, 3).toString("base64url"))?.length).toBe(48);
    expect(decodeSecretKey(Buffer.alloc(16, 3).toString("base64"))).toBeNull();
  });

  it("reads .env but lets the real environment win", async () => {
    const dir = tmp();
    const { writeFileSync } = await import("node:fs");
    writeFileSync(path.join(dir, ".env"), "PORT=4321\nLOG_LEVEL=debug\n");
    const { readEnvironment } = await import("../../src/config/load.ts");
    const env = readEnvironment(dir, { LOG_LEVEL: "warn" });
    const config = loadConfig(env, dir);
    expect(config.port).toBe(4321);
    expect(config.logLevel).toBe("warn");
  });
});

describe("secrets from files (SECRET_KEY_FILE, UPSTREAM_CLIENT_SECRET_FILE, DATABASE_URL_FILE)", () => {
  const github = { UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "Iv1.x", ALLOW_ANY_USER: "true" };

  it("reads each value from its file, without the trailing newline a mounted secret has", () => {
    const dir = tmp();
    writeFileSync(path.join(dir, "key"), `${KEY}\n`);
    writeFileSync(path.join(dir, "client-secret"), "s3cret\n");
    writeFileSync(path.join(dir, "db-url"), "postgresql://broker:pw@db.internal:5432/broker\n");
    const config = loadConfig(
      { ...github, SECRET_KEY_FILE: path.join(dir, "key"), UPSTREAM_CLIENT_SECRET_FILE: "client-secret", DATABASE_URL_FILE: "db-url" },
      dir,
    );
    expect(config.secretKey.equals(Buffer.alloc(32, 7))).toBe(true);
    expect(config.upstream.clientSecret).toBe("s3cret");
    expect(config.databaseUrl).toBe("postgresql://broker:pw@db.internal:5432/broker");
  });

  it("refuses a file that cannot be read, an empty one, or both spellings at once", () => {
    const dir = tmp();
    writeFileSync(path.join(dir, "empty"), "\n");
    expect(configError({ ...github, SECRET_KEY: KEY, UPSTREAM_CLIENT_SECRET_FILE: path.join(dir, "missing") }).message).toBe(
      `UPSTREAM_CLIENT_SECRET_FILE: cannot read ${path.join(dir, "missing")} (ENOENT): mount the secret there or correct the path`,
    );
    expect(configError({ ...github, UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY_FILE: path.join(dir, "empty") }).message).toBe(
      `SECRET_KEY_FILE: ${path.join(dir, "empty")} is empty`,
    );
    expect(configError({ ...github, UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: KEY, SECRET_KEY_FILE: path.join(dir, "empty") }).message).toBe(
      "SECRET_KEY_FILE: set either SECRET_KEY or SECRET_KEY_FILE, not both",
    );
  });
});

describe("variables that look like ours", () => {
  it("are found with the name they most likely mean; the rest of the environment is left alone", () => {
    const env = {
      UPSTREAM_PROVIDR: "github",
      SECRETKEY: "x",
      DATABASE_URI: "file:x.db",
      UPSTREAM_TENANT: "x",
      HOME: "/root",
      HOSTNAME: "box",
      PATH: "/bin",
      GITHUB_TOKEN: "x",
      NODE_OPTIONS: "",
      PORT: "3000",
    };
    expect(unknownVariables(env)).toEqual([
      { name: "DATABASE_URI", nearest: "DATABASE_URL" },
      { name: "SECRETKEY", nearest: "SECRET_KEY" },
      { name: "UPSTREAM_PROVIDR", nearest: "UPSTREAM_PROVIDER" },
      { name: "UPSTREAM_TENANT", nearest: expect.stringMatching(/^UPSTREAM_/) },
    ]);
    // Every variable the broker reads is known (the documentation test checks the list against the code).
    expect(unknownVariables(Object.fromEntries(KNOWN_VARIABLES.map((name) => [name, "x"])))).toEqual([]);
  });
});

/** Runs `serve` (what `npm start` and `mcp-auth-broker serve` run) in this process with `env` only. */
async function serveInProcess(cwd: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  const stdout: string[] = [];
  const stderr: string[] = [];
  const code = await serve({ cwd, env, out: (text) => stdout.push(text), err: (text) => stderr.push(text) });
  return { code, stdout: stdout.join(""), stderr: stderr.join("") };
}

// How the server reports a start-up problem: one line, exit code 1, no stack. Each case runs
// `serve` in-process (a process per case cost a second of CPU each); the real process below shows
// that the line and the code reach stderr and the exit status.
describe("start-up problems", () => {
  it.each([
    [{ PORT: "abc" }, /^mcp-auth-broker: configuration error: PORT: expected a port number/],
    // npm start outside demo mode without an access policy: the line names every variable to set.
    [
      { UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: KEY },
      /^mcp-auth-broker: configuration error: ALLOWED_USERS: nobody is allowed to sign in yet: set ALLOWED_USERS .*ALLOWED_EMAIL_DOMAINS .*ALLOWED_GITHUB_ORGS .*ALLOW_ANY_USER=true/,
    ],
    // A real login in front of nothing named: not the demo MCP server, silently.
    [
      { UPSTREAM_PROVIDER: "github", UPSTREAM_CLIENT_ID: "x", UPSTREAM_CLIENT_SECRET: "y", SECRET_KEY: KEY, ALLOW_ANY_USER: "true" },
      /^mcp-auth-broker: configuration error: MCP_SERVER_URL: outside demo mode, say which MCP server to protect: set MCP_SERVER_URL .* or MCP_SERVER_COMMAND/,
    ],
    // PostgreSQL that is not there: the line says why, and what to change.
    [
      { DATABASE_URL: "postgresql://broker:pw@127.0.0.1:1/broker" },
      /^mcp-auth-broker: cannot use the database \(DATABASE_URL=postgresql:\/\/broker:\*\*\*@127\.0\.0\.1:1\/broker\): connection refused by 127\.0\.0\.1:1 \(nothing listens there\); start PostgreSQL, or correct the host and port in DATABASE_URL$/,
    ],
  ])("stops with one line for %j", async (env, expected) => {
    const result = await serveInProcess(tmp(), env as Record<string, string>);
    expect(result.code).toBe(1);
    const lines = result.stderr.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(expected);
    expect(result.stderr).not.toMatch(/\bat .*\.ts:\d+/);
    expect(result.stdout).toBe("");
  });

  it("names the port that is taken, and what to do", async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, "127.0.0.1", resolve));
    const port = (taken.address() as AddressInfo).port;
    try {
      const cwd = tmp();
      const result = await serveInProcess(cwd, { PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "silent", DATABASE_URL: await preparedDatabaseUrl(cwd) });
      expect(result.code).toBe(1);
      expect(result.stderr).toBe(`mcp-auth-broker: port ${port} on 127.0.0.1 is already in use; set PORT to a free port\n`);
    } finally {
      taken.close();
    }
  });

  it("reads a .env file from its working directory", async () => {
    const dir = tmp();
    writeFileSync(path.join(dir, ".env"), "LOG_LEVEL=chatty\n");
    const result = await serveInProcess(dir, {});
    expect(result.code).toBe(1);
    expect(result.stderr.trim()).toMatch(/^mcp-auth-broker: configuration error: LOG_LEVEL: expected one of/);
    expect(readFileSync(path.join(dir, ".env"), "utf8")).toContain("chatty");
  });
});

describe("the real process", () => {
  it("prints a start-up problem as one line on stderr and exits 1", async () => {
    const result = await runToEnd(startServer({ cwd: tmp(), env: { PORT: "abc" } }));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^mcp-auth-broker: configuration error: PORT: expected a port number[^\n]*\n$/);
    expect(result.stdout).toBe("");
  });

  it("warns at start about a misspelt variable, naming the one it likely means", async () => {
    const cwd = tmp();
    const child = startServer({ cwd, env: { PORT: "0", UPSTREAM_PROVIDR: "github", LOG_LEVEL: "warn", DATABASE_URL: await preparedDatabaseUrl(cwd) } });
    const finished = runToEnd(child, 30_000);
    await waitForOutput(child, /mcp-auth-broker is running/).catch((err: unknown) => {
      child.kill("SIGKILL");
      throw err;
    });
    child.kill("SIGTERM");
    const { stdout, code } = await finished;
    expect(code).toBe(0);
    expect(stdout).toMatch(/UPSTREAM_PROVIDR is not a setting of mcp-auth-broker \(did you mean UPSTREAM_PROVIDER\?\); it is ignored/);
    // Demo mode, as without the variable: the warning is the only sign of the mistake.
    expect(stdout).toContain("DEMO MODE");
  });
});
