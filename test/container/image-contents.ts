// What the image holds, read from its mounted root file system: no dev dependency, no test file,
// no .env, and where its size goes.
import { existsSync, lstatSync, readdirSync, readFileSync, readlinkSync } from "node:fs";
import path from "node:path";
import { projectRoot } from "../support/spawn.ts";

/** Files and folders under `dir` (relative paths), without following links, skipping `skip` folders. */
function walk(dir: string, skip: (rel: string) => boolean, rel = ""): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(path.join(dir, rel), { withFileTypes: true })) {
    const child = rel ? `${rel}/${entry.name}` : entry.name;
    if (skip(child)) continue;
    out.push(child);
    if (entry.isDirectory()) out.push(...walk(dir, skip, child));
  }
  return out;
}

function bytesUnder(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) total += bytesUnder(full);
    else if (entry.isFile()) total += lstatSync(full).size;
  }
  return total;
}

/** Problems found in the image's /app (empty when none), and its largest packages. */
export function inspectApp(rootfs: string): { problems: string[]; largest: Array<{ name: string; bytes: number }> } {
  const app = path.join(rootfs, "app");
  const problems: string[] = [];
  // Every package the lock file marks dev-only, at the path npm would install it; devOptional ones
  // too (a dev dependency that is also an optional peer, which npm keeps with --omit=dev).
  const lock = JSON.parse(readFileSync(path.join(projectRoot, "package-lock.json"), "utf8")) as {
    packages: Record<string, { dev?: boolean; devOptional?: boolean }>;
  };
  const devOnly = Object.entries(lock.packages).filter(([key, meta]) => key.startsWith("node_modules/") && (meta.dev === true || meta.devOptional === true));
  const present = devOnly.filter(([key]) => existsSync(path.join(app, key))).map(([key]) => key.replace(/^node_modules\//, ""));
  if (present.length > 0)
    problems.push(`dev dependencies in the image: ${present.slice(0, 10).join(", ")}${present.length > 10 ? ` and ${present.length - 10} more` : ""}`);
  for (const name of ["jest", "typescript", "@biomejs/biome", "ts-jest", "tsx", "playwright-core"]) {
    if (existsSync(path.join(app, "node_modules", name))) problems.push(`${name} is in the image`);
  }
  if (devOnly.length < 50) problems.push(`the lock file names only ${devOnly.length} dev-only packages: the check is not looking at the right file`);

  const own = walk(app, (rel) => rel === "node_modules");
  const tests = own.filter((rel) => /(^|\/)test(\/|$)|\.test\.[cm]?[jt]s$/.test(rel));
  if (tests.length > 0) problems.push(`test files in the image: ${tests.slice(0, 5).join(", ")}`);
  const envFiles = own.filter((rel) => /(^|\/)\.env(\.|$)/.test(rel));
  if (envFiles.length > 0) problems.push(`.env files in the image: ${envFiles.join(", ")}`);
  const sources = own.filter((rel) => rel.startsWith("src/") && rel.endsWith(".ts"));
  if (sources.join() !== "src/config/database-kind.ts") problems.push(`TypeScript sources other than the one the Prisma config reads: ${sources.join(", ")}`);
  for (const needed of [
    "dist/cli/main.js",
    "dist/store/generated/sqlite/client.js",
    "dist/store/generated/postgres/client.js",
    "prisma.config.ts",
    "bin/mcp-auth-broker.js",
  ]) {
    if (!existsSync(path.join(app, needed))) problems.push(`${needed} is missing from the image`);
  }
  for (const db of ["sqlite", "postgres"]) {
    if (!existsSync(path.join(app, "prisma", db, "migrations"))) problems.push(`prisma/${db}/migrations is missing from the image`);
  }
  if (!lstatSync(path.join(app, "data")).isSymbolicLink() || readlinkSync(path.join(app, "data")) !== "/data")
    problems.push("/app/data is not a link to /data");

  const modules = path.join(app, "node_modules");
  const packages = readdirSync(modules).flatMap((name) =>
    name.startsWith("@") ? readdirSync(path.join(modules, name)).map((sub) => `${name}/${sub}`) : name.startsWith(".") ? [] : [name],
  );
  const largest = packages
    .map((name) => ({ name, bytes: bytesUnder(path.join(modules, name)) }))
    .sort((a, b) => b.bytes - a.bytes)
    .slice(0, 8);
  return { problems, largest };
}
