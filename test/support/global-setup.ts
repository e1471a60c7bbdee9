// A real PostgreSQL server for the storage tests, started by the test suite itself when the server
// binaries are installed (Debian's `postgresql` package, which .ci/run installs). Nothing to start
// by hand; when the binaries are missing the PostgreSQL tests are skipped with a notice.
import { execFile, execFileSync, spawnSync } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import net from "node:net";

export interface PostgresServer {
  /** Base URL without database name, e.g. postgresql://postgres@127.0.0.1:5555 */
  readonly baseUrl: string;
  readonly dataDir: string;
  /**
   * Stops the server without removing it, off the event loop (a broker in this process keeps
   * answering meanwhile): `immediate` ends every backend at once, as a crash or a killed host does.
   */
  halt(mode: "fast" | "immediate"): Promise<void>;
  stop(): void;
}

export function findPostgresBin(): string | null {
  const candidates: string[] = [];
  if (existsSync("/usr/lib/postgresql")) {
    for (const v of readdirSync("/usr/lib/postgresql").sort().reverse()) candidates.push(path.join("/usr/lib/postgresql", v, "bin"));
  }
  for (const dir of candidates) if (existsSync(path.join(dir, "initdb")) && existsSync(path.join(dir, "pg_ctl"))) return dir;
  const which = spawnSync("sh", ["-c", "command -v initdb"], { encoding: "utf8" });
  const found = which.stdout.trim();
  return found ? path.dirname(found) : null;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolve(typeof addr === "object" && addr ? addr.port : 0));
    });
  });
}

/**
 * `durable`: fsync and synchronous commit on, as in production (the benchmark); the tests run
 * without them (nothing to keep after a test, and much faster).
 */
export async function startPostgres(options: { durable?: boolean } = {}): Promise<PostgresServer | null> {
  const bin = findPostgresBin();
  if (!bin) return null;
  const root = mkdtempSync(path.join(tmpdir(), "mab-pg-"));
  const dataDir = path.join(root, "data");
  const isRoot = process.getuid?.() === 0;
  // initdb refuses to run as root: run the server as the postgres system user.
  const run = (cmd: string, args: string[]) => {
    if (isRoot) execFileSync("runuser", ["-u", "postgres", "--", path.join(bin, cmd), ...args], { stdio: "pipe" });
    else execFileSync(path.join(bin, cmd), args, { stdio: "pipe" });
  };
  if (isRoot) {
    const uid = Number(execFileSync("id", ["-u", "postgres"]).toString().trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"]).toString().trim());
    chownSync(root, uid, gid);
  }
  chmodSync(root, 0o700);
  const port = await freePort();
  run("initdb", ["-D", dataDir, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8"]);
  run("pg_ctl", [
    "-D",
    dataDir,
    "-w",
    "-t",
    "30",
    "-l",
    path.join(root, "server.log"),
    "-o",
    `-c listen_addresses=127.0.0.1 -p ${port} -k ${root}${options.durable ? "" : " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"}`,
    "start",
  ]);
  return {
    baseUrl: `postgresql://postgres@127.0.0.1:${port}`,
    dataDir,
    halt(mode) {
      const args = ["-D", dataDir, "-m", mode, "-w", "stop"];
      const [command, argv] = isRoot ? ["runuser", ["-u", "postgres", "--", path.join(bin, "pg_ctl"), ...args]] : [path.join(bin, "pg_ctl"), args];
      return new Promise((resolve, reject) => execFile(command, argv, (err) => (err ? reject(err) : resolve())));
    },
    stop() {
      try {
        run("pg_ctl", ["-D", dataDir, "-m", "immediate", "-w", "stop"]);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
  };
}

const projectRoot = path.resolve(import.meta.dirname, "../..");
/** tsc's incremental state, written by every build that emits (`npm run build`, npm install). */
const buildStamp = path.join(projectRoot, "dist", ".tsbuildinfo");

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestMtime(full) : statSync(full).mtimeMs);
  }
  return newest;
}

/**
 * Tests that start the real process run dist/ (what `npm start` and the binary run): build it
 * when src/ changed since the last build, so a test never runs stale code.
 */
export function ensureBuilt(): void {
  const builtAt = existsSync(buildStamp) ? statSync(buildStamp).mtimeMs : 0;
  if (builtAt > newestMtime(path.join(projectRoot, "src"))) return;
  process.stdout.write("\n[setup] src/ changed since the last build: npm run build\n");
  const tsc = path.join(projectRoot, "node_modules/typescript/bin/tsc");
  const result = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: projectRoot, encoding: "utf8" });
  if (result.status !== 0) throw new Error(`npm run build failed; the tests need dist/:\n${result.stdout}${result.stderr}`);
  // tsc leaves the file alone when nothing needed emitting (only mtimes changed): touch it.
  const now = new Date();
  utimesSync(buildStamp, now, now);
}

// Jest global setup: dist/ up to date, and one PostgreSQL server for the whole run (when
// installed). It lives in this one file because Jest loads global setup outside its module
// transform: no .ts imports here.

declare global {
  var __mabPostgres: PostgresServer | null | undefined;
}

export default async function globalSetup(): Promise<void> {
  ensureBuilt();
  if (process.env.MAB_TEST_POSTGRES_URL) return;
  const server = await startPostgres();
  globalThis.__mabPostgres = server;
  if (server) process.env.MAB_TEST_POSTGRES_URL = server.baseUrl;
  else
    process.stdout.write(
      "\n[notice] PostgreSQL server binaries not found: PostgreSQL storage tests will be skipped (install Debian's postgresql package to run them).\n",
    );
}
