// `npm run test:package`: the package as a user gets it. `npm pack` (which builds dist/ afresh),
// then in an empty folder `npm install ./mcp-auth-broker-*.tgz` and `npx mcp-auth-broker serve` in
// demo mode on a free port, until /healthz answers; then SIGTERM. Fails when the tarball carries
// what it must not (tests, sources, dev tooling) or lacks what the installed broker needs (the
// compiled Prisma clients, migrations, the Prisma CLI configuration), when dist/ imports a package
// that is not a dependency (npm never installs devDependencies of a package), when the install
// warns about engines, or when the broker does not start. Takes a minute or two
// (the install unpacks ~240 packages), so it is not part of `npm test`; a test there runs
// `--files-only`: the tarball's file list, from `npm pack --dry-run`, in a second.
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8"));
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

/** What the broker reads at run time from its own package, beyond dist/. */
const REQUIRED = [
  "package.json",
  "bin/mcp-auth-broker.js",
  "dist/main.js",
  "dist/index.js",
  "dist/index.d.ts",
  "dist/cli/main.js",
  "dist/store/generated/sqlite/client.js",
  "dist/store/generated/postgres/client.js",
  "prisma.config.ts",
  "src/config/database-kind.ts",
  "prisma/sqlite/schema.prisma",
  "prisma/postgres/schema.prisma",
  "prisma/sqlite/migrations/migration_lock.toml",
  "prisma/postgres/migrations/migration_lock.toml",
  "README.md",
  ".env.example",
];
/** prisma.config.ts loads this one source file (the database kind rule); nothing else of src/. */
const ALLOWED_SOURCES = new Set(["src/config/database-kind.ts"]);

/** Why a tarball with these files (and this package.json) would not work or carries too much. */
export function packageProblems(files, packedManifest) {
  const problems = [];
  const set = new Set(files);
  for (const file of REQUIRED) if (!set.has(file)) problems.push(`missing ${file}`);
  for (const file of files) {
    if (/^(test|bench|scripts|node_modules|coverage|data)\//.test(file)) problems.push(`carries ${file}`);
    else if (file.startsWith("src/") && !ALLOWED_SOURCES.has(file)) problems.push(`carries the source ${file}`);
    else if (/\.(test|spec)\.[cm]?[jt]s$|\.map$|\.tsbuildinfo$/.test(file)) problems.push(`carries ${file}`);
  }
  // An install of the package runs these: they must not need what the tarball leaves out.
  for (const script of ["preinstall", "install", "postinstall"]) {
    if (packedManifest.scripts?.[script]) problems.push(`runs a ${script} script at install: ${packedManifest.scripts[script]}`);
  }
  return problems;
}

/** Every file under `dir`, relative to it. */
function walk(dir, prefix = "") {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? walk(path.join(dir, entry.name), `${prefix}${entry.name}/`) : [`${prefix}${entry.name}`],
  );
}

/**
 * Packages dist/ imports that an install of the package does not bring: anything but Node's own
 * modules and `dependencies` (npm never installs a dependency's devDependencies).
 */
export function importProblems(distDir, dependencies) {
  const builtins = new Set(builtinModules);
  const problems = new Set();
  for (const file of walk(distDir).filter((f) => f.endsWith(".js"))) {
    const text = readFileSync(path.join(distDir, file), "utf8");
    for (const [, specifier] of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)["']([^"'./][^"']*)["']/g)) {
      if (specifier.startsWith("node:") || builtins.has(specifier)) continue;
      const name = specifier.startsWith("@") ? specifier.split("/").slice(0, 2).join("/") : specifier.split("/")[0];
      if (!Object.hasOwn(dependencies, name)) problems.add(`dist/${file} imports ${name}, which is not a dependency`);
    }
  }
  return [...problems];
}

function fail(message) {
  process.stderr.write(`test:package: ${message}\n`);
  process.exit(1);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** The broker's variables left out of the environment: the installed broker starts as a newcomer's does. */
function newcomerEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (/^(PORT|HOST|PUBLIC_URL|DATABASE_URL|MCP_|UPSTREAM_|GITHUB_|SECRET_KEY|ALLOW|LOG_|DEMO_|NODE_OPTIONS$|npm_)/.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

function filesOnly() {
  const out = execFileSync(npm, ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const [packed] = JSON.parse(out);
  const problems = [
    ...packageProblems(
      packed.files.map((f) => f.path),
      manifest,
    ),
    ...importProblems(path.join(root, "dist"), manifest.dependencies ?? {}),
  ];
  if (problems.length) fail(`the tarball is wrong:\n  ${problems.join("\n  ")}`);
  process.stdout.write(`test:package: ${packed.files.length} files, ${packed.size} bytes packed: ok\n`);
}

async function full() {
  const timings = [];
  const step = async (what, run) => {
    const started = Date.now();
    const result = await run();
    timings.push(`${what} ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return result;
  };
  const dir = mkdtempSync(path.join(tmpdir(), "mab-package-"));
  let child;
  try {
    const tarball = await step("npm pack", () => {
      execFileSync(npm, ["pack", "--loglevel=warn", "--pack-destination", dir], { cwd: root, stdio: ["ignore", "ignore", "inherit"] });
      return path.join(
        dir,
        readdirSync(dir).find((f) => f.endsWith(".tgz")),
      );
    });
    const files = execFileSync("tar", ["-tzf", tarball], { encoding: "utf8" })
      .split("\n")
      .filter(Boolean)
      .map((f) => f.replace(/^package\//, ""));
    const packedManifest = JSON.parse(execFileSync("tar", ["-xzOf", tarball, "package/package.json"], { encoding: "utf8" }));
    const problems = packageProblems(files, packedManifest);
    if (problems.length) fail(`the tarball is wrong:\n  ${problems.join("\n  ")}`);

    const app = path.join(dir, "app");
    mkdirSync(app);
    writeFileSync(path.join(app, "package.json"), `${JSON.stringify({ name: "package-test", private: true }, null, 2)}\n`);
    const installed = await step("npm install", () =>
      execFileSync(npm, ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball], { cwd: app, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }),
    );
    if (/EBADENGINE/.test(installed)) fail(`the install warns about engines:\n${installed}`);
    const imports = importProblems(path.join(app, "node_modules/mcp-auth-broker/dist"), packedManifest.dependencies ?? {});
    if (imports.length) fail(`the installed broker needs what its install does not bring:\n  ${imports.join("\n  ")}`);

    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    await step("mcp-auth-broker serve until /healthz", async () => {
      // What `npx mcp-auth-broker serve` runs, without npm in between (npm exec ends by the signal
      // it forwards, which would hide the broker's own exit code).
      child = spawn(path.join(app, "node_modules/.bin/mcp-auth-broker"), ["serve"], {
        cwd: app,
        env: newcomerEnv({ PORT: String(port), PUBLIC_URL: url, LOG_FORMAT: "pretty", LOG_LEVEL: "warn" }),
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no banner within 120 s:\n${output}`)), 120_000);
        const onData = (d) => {
          output += d.toString();
          if (/mcp-auth-broker is running/.test(output)) {
            clearTimeout(timer);
            resolve();
          }
        };
        child.stdout.on("data", onData);
        child.stderr.on("data", onData);
        child.once("exit", (code) => reject(new Error(`serve exited with ${code}:\n${output}`)));
      });
      const health = await (await fetch(`${url}/healthz`)).json();
      if (health.status !== "ok") throw new Error(`/healthz answered ${JSON.stringify(health)}`);
      const exited = new Promise((resolve) => child.once("exit", (code) => resolve(code)));
      child.kill("SIGTERM");
      const code = await exited;
      if (code !== 0) throw new Error(`serve exited with ${code} on SIGTERM:\n${output}`);
    });
    process.stdout.write(`test:package: ${files.length} files; installed and served /healthz (${timings.join(", ")}): ok\n`);
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  } finally {
    if (child && child.exitCode === null) child.kill("SIGKILL");
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  if (process.argv.includes("--files-only")) filesOnly();
  else await full();
}
